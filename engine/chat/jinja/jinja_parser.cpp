// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/jinja/jinja_parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

namespace engine::jinja {

namespace {

using T = Token::Type;

class Parser {
public:
    Parser(const std::vector<Token>& tokens, std::string_view source) : m_tokens(tokens), m_source(source) {}

    Body parse_all()
    {
        std::string ended_by;
        Body body = parse_body({}, ended_by);
        return body;
    }

private:
    // ---- token stream ---------------------------------------------------------------------------
    const Token& peek(std::size_t ahead = 0) const
    {
        const std::size_t i = m_pos + ahead;
        return i < m_tokens.size() ? m_tokens[i] : m_tokens.back();
    }
    const Token& next() { return m_tokens[m_pos < m_tokens.size() - 1 ? m_pos++ : m_pos]; }
    bool at_op(std::string_view op, std::size_t ahead = 0) const
    {
        return peek(ahead).type == T::Operator && peek(ahead).text == op;
    }
    bool at_name(std::string_view name, std::size_t ahead = 0) const
    {
        return peek(ahead).type == T::Name && peek(ahead).text == name;
    }
    bool accept_op(std::string_view op)
    {
        if (!at_op(op))
            return false;
        ++m_pos;
        return true;
    }
    bool accept_name(std::string_view name)
    {
        if (!at_name(name))
            return false;
        ++m_pos;
        return true;
    }

    [[noreturn]] void fail(const std::string& what, std::size_t offset) const
    {
        throw TemplateError(what + " at " + source_position(m_source, offset));
    }
    [[noreturn]] void unexpected(const std::string& wanted) const
    {
        const Token& t = peek();
        std::string got;
        switch (t.type) {
        case T::End:
            got = "the end of the template";
            break;
        case T::CloseBlock:
            got = "'%}'";
            break;
        case T::CloseOutput:
            got = "'}}'";
            break;
        case T::String:
            got = "a string";
            break;
        case T::Text:
            got = "text";
            break;
        default:
            got = "'" + t.text + "'";
        }
        fail("expected " + wanted + " but found " + got, t.offset);
    }
    void expect_op(std::string_view op)
    {
        if (!accept_op(op))
            unexpected("'" + std::string(op) + "'");
    }
    std::string expect_name()
    {
        if (peek().type != T::Name)
            unexpected("a name");
        return next().text;
    }
    void expect_close_block()
    {
        if (peek().type != T::CloseBlock)
            unexpected("'%}'");
        ++m_pos;
    }

    struct DepthGuard {
        Parser& p;
        DepthGuard(Parser& parser, std::size_t offset) : p(parser)
        {
            if (++p.m_depth > k_max_nesting)
                p.fail("the template nests deeper than " + std::to_string(k_max_nesting) + " levels", offset);
        }
        ~DepthGuard() { --p.m_depth; }
        DepthGuard(const DepthGuard&) = delete;
        DepthGuard& operator=(const DepthGuard&) = delete;
    };

    // ---- statements -----------------------------------------------------------------------------

    // Parses nodes until a block tag whose keyword is one of `enders` (consumed up to the keyword,
    // which is returned in `ended_by`); with no enders, until the end of the template.
    Body parse_body(std::initializer_list<std::string_view> enders, std::string& ended_by)
    {
        DepthGuard guard(*this, peek().offset);
        Body body;
        while (true) {
            const Token& t = peek();
            if (t.type == T::End) {
                if (enders.size() == 0)
                    return body;
                std::string names;
                for (auto e : enders)
                    names += (names.empty() ? "'" : " or '") + std::string(e) + "'";
                fail("a block is not closed: expected " + names + " before the end of the template", t.offset);
            }
            if (t.type == T::Text) {
                auto node = make_node(Node::Kind::Text, t.offset);
                node->text = next().text;
                body.push_back(std::move(node));
                continue;
            }
            if (t.type == T::OpenOutput) {
                ++m_pos;
                auto node = make_node(Node::Kind::Output, t.offset);
                node->expr = parse_expression();
                if (peek().type != T::CloseOutput)
                    unexpected("'}}'");
                ++m_pos;
                body.push_back(std::move(node));
                continue;
            }
            if (t.type != T::OpenBlock)
                unexpected("text or a tag");
            const Token& keyword = peek(1);
            if (keyword.type != T::Name)
                fail("a tag must start with a keyword", keyword.offset);
            for (auto e : enders)
                if (keyword.text == e) {
                    m_pos += 2;
                    ended_by = keyword.text;
                    return body;
                }
            m_pos += 2;
            body.push_back(parse_statement(keyword));
        }
    }

    NodePtr make_node(Node::Kind kind, std::size_t offset)
    {
        auto node = std::make_unique<Node>();
        node->kind = kind;
        node->offset = offset;
        return node;
    }

    NodePtr parse_statement(const Token& keyword)
    {
        const std::string& k = keyword.text;
        if (k == "if")
            return parse_if(keyword.offset);
        if (k == "for")
            return parse_for(keyword.offset);
        if (k == "set")
            return parse_set(keyword.offset);
        if (k == "macro")
            return parse_macro(keyword.offset);
        if (k == "call")
            return parse_call_block(keyword.offset);
        if (k == "filter")
            return parse_filter_block(keyword.offset);
        if (k == "break" || k == "continue") {
            expect_close_block();
            return make_node(k == "break" ? Node::Kind::Break : Node::Kind::Continue, keyword.offset);
        }
        if (k == "generation") {
            expect_close_block();
            auto node = make_node(Node::Kind::Generation, keyword.offset);
            std::string ended;
            node->body = parse_body({"endgeneration"}, ended);
            expect_close_block();
            return node;
        }
        fail("the tag '" + k + "' is not supported in chat templates", keyword.offset);
    }

    NodePtr parse_if(std::size_t offset)
    {
        auto node = make_node(Node::Kind::If, offset);
        node->conditions.push_back(parse_expression());
        expect_close_block();
        while (true) {
            std::string ended;
            Body body = parse_body({"elif", "else", "endif"}, ended);
            node->bodies.push_back(std::move(body));
            if (ended == "elif") {
                node->conditions.push_back(parse_expression());
                expect_close_block();
                continue;
            }
            expect_close_block();
            if (ended == "else") {
                node->else_body = parse_body({"endif"}, ended);
                expect_close_block();
            }
            return node;
        }
    }

    std::vector<std::string> parse_targets()
    {
        std::vector<std::string> targets;
        const bool paren = accept_op("(");
        do {
            targets.push_back(expect_name());
        } while (accept_op(","));
        if (paren)
            expect_op(")");
        return targets;
    }

    NodePtr parse_for(std::size_t offset)
    {
        auto node = make_node(Node::Kind::For, offset);
        node->targets = parse_targets();
        if (!accept_name("in"))
            unexpected("'in'");
        node->expr = parse_or(); // not a conditional: "if" here filters the loop
        if (accept_name("if"))
            node->filter = parse_or();
        if (accept_name("recursive"))
            node->recursive = true;
        expect_close_block();
        std::string ended;
        node->body = parse_body({"else", "endfor"}, ended);
        expect_close_block();
        if (ended == "else") {
            node->else_body = parse_body({"endfor"}, ended);
            expect_close_block();
        }
        return node;
    }

    NodePtr parse_set(std::size_t offset)
    {
        auto node = make_node(Node::Kind::Set, offset);
        if (peek().type == T::Name && at_op(".", 1)) { // set ns.attr = …
            node->targets.push_back(next().text);
            ++m_pos;
            node->text = expect_name();
            expect_op("=");
            node->expr = parse_expression_tuple();
            expect_close_block();
            return node;
        }
        node->targets = parse_targets();
        if (accept_op("=")) {
            node->expr = parse_expression_tuple();
            expect_close_block();
            return node;
        }
        if (node->targets.size() != 1)
            unexpected("'='");
        // {% set x %}…{% endset %}, optionally with filters: {% set x | trim %}
        ExprPtr filters;
        while (accept_op("|"))
            filters = parse_filter_tail(std::move(filters));
        expect_close_block();
        std::string ended;
        node->body = parse_body({"endset"}, ended);
        expect_close_block();
        node->filter = std::move(filters);
        return node;
    }

    std::vector<MacroParam> parse_params()
    {
        std::vector<MacroParam> params;
        expect_op("(");
        while (!accept_op(")")) {
            if (!params.empty())
                expect_op(",");
            if (at_op(")")) { // trailing comma
                ++m_pos;
                break;
            }
            MacroParam p;
            p.name = expect_name();
            if (accept_op("="))
                p.default_value = parse_expression();
            params.push_back(std::move(p));
        }
        return params;
    }

    NodePtr parse_macro(std::size_t offset)
    {
        auto node = make_node(Node::Kind::Macro, offset);
        node->text = expect_name();
        node->params = parse_params();
        expect_close_block();
        std::string ended;
        node->body = parse_body({"endmacro"}, ended);
        if (peek().type == T::Name) // {% endmacro name %}
            ++m_pos;
        expect_close_block();
        return node;
    }

    NodePtr parse_call_block(std::size_t offset)
    {
        auto node = make_node(Node::Kind::CallBlock, offset);
        if (at_op("("))
            node->params = parse_params();
        node->expr = parse_expression();
        if (node->expr->kind != Expr::Kind::Call)
            fail("a call block needs a macro call", offset);
        expect_close_block();
        std::string ended;
        node->body = parse_body({"endcall"}, ended);
        expect_close_block();
        return node;
    }

    NodePtr parse_filter_block(std::size_t offset)
    {
        auto node = make_node(Node::Kind::FilterBlock, offset);
        node->expr = parse_filter_tail(nullptr);
        while (accept_op("|"))
            node->expr = parse_filter_tail(std::move(node->expr));
        expect_close_block();
        std::string ended;
        node->body = parse_body({"endfilter"}, ended);
        expect_close_block();
        return node;
    }

    // ---- expressions ----------------------------------------------------------------------------

    ExprPtr make_expr(Expr::Kind kind, std::size_t offset)
    {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->offset = offset;
        return e;
    }
    ExprPtr make_binary(std::string op, ExprPtr a, ExprPtr b, std::size_t offset)
    {
        auto e = make_expr(Expr::Kind::Binary, offset);
        e->name = std::move(op);
        e->a = std::move(a);
        e->b = std::move(b);
        return e;
    }

    // An expression, or a tuple of them without parentheses (`set a = 1, 2`).
    ExprPtr parse_expression_tuple()
    {
        const std::size_t offset = peek().offset;
        ExprPtr first = parse_expression();
        if (!at_op(","))
            return first;
        auto tuple = make_expr(Expr::Kind::Tuple, offset);
        tuple->items.push_back(std::move(first));
        while (accept_op(",")) {
            if (peek().type == T::CloseBlock)
                break;
            tuple->items.push_back(parse_expression());
        }
        return tuple;
    }

    ExprPtr parse_expression()
    {
        DepthGuard guard(*this, peek().offset);
        const std::size_t offset = peek().offset;
        ExprPtr value = parse_or();
        if (!at_name("if"))
            return value;
        ++m_pos;
        auto e = make_expr(Expr::Kind::Conditional, offset);
        e->a = std::move(value);
        e->b = parse_or();
        if (accept_name("else"))
            e->c = parse_expression();
        return e;
    }

    ExprPtr parse_or()
    {
        ExprPtr left = parse_and();
        while (at_name("or")) {
            const std::size_t offset = next().offset;
            left = make_binary("or", std::move(left), parse_and(), offset);
        }
        return left;
    }
    ExprPtr parse_and()
    {
        ExprPtr left = parse_not();
        while (at_name("and")) {
            const std::size_t offset = next().offset;
            left = make_binary("and", std::move(left), parse_not(), offset);
        }
        return left;
    }
    ExprPtr parse_not()
    {
        if (at_name("not")) {
            DepthGuard guard(*this, peek().offset);
            auto e = make_expr(Expr::Kind::Unary, next().offset);
            e->name = "not";
            e->a = parse_not();
            return e;
        }
        return parse_compare();
    }
    ExprPtr parse_compare()
    {
        ExprPtr left = parse_concat();
        while (true) {
            const Token& t = peek();
            std::string op;
            if (t.type == T::Operator && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" ||
                                          t.text == "<=" || t.text == ">="))
                op = t.text;
            else if (at_name("in"))
                op = "in";
            else if (at_name("not") && at_name("in", 1))
                op = "not in";
            else
                return left;
            m_pos += op == "not in" ? 2 : 1;
            left = make_binary(op, std::move(left), parse_concat(), t.offset);
        }
    }
    ExprPtr parse_concat()
    {
        ExprPtr left = parse_sum();
        while (at_op("~")) {
            const std::size_t offset = next().offset;
            left = make_binary("~", std::move(left), parse_sum(), offset);
        }
        return left;
    }
    ExprPtr parse_sum()
    {
        ExprPtr left = parse_product();
        while (at_op("+") || at_op("-")) {
            const Token& t = next();
            left = make_binary(t.text, std::move(left), parse_product(), t.offset);
        }
        return left;
    }
    ExprPtr parse_product()
    {
        ExprPtr left = parse_power();
        while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
            const Token& t = next();
            left = make_binary(t.text, std::move(left), parse_power(), t.offset);
        }
        return left;
    }
    ExprPtr parse_power()
    {
        ExprPtr left = parse_unary();
        while (at_op("**")) {
            const std::size_t offset = next().offset;
            left = make_binary("**", std::move(left), parse_unary(), offset);
        }
        return left;
    }
    ExprPtr parse_unary()
    {
        DepthGuard guard(*this, peek().offset);
        ExprPtr node;
        if (at_op("-") || at_op("+")) {
            const Token& t = next();
            node = make_expr(Expr::Kind::Unary, t.offset);
            node->name = t.text;
            node->a = parse_unary_operand();
        } else {
            node = parse_postfix(parse_primary());
        }
        return parse_filters_and_tests(std::move(node));
    }
    // The operand of a unary minus: no filters (`-x|abs` is `(-x)|abs`, as in Jinja).
    ExprPtr parse_unary_operand()
    {
        DepthGuard guard(*this, peek().offset);
        if (at_op("-") || at_op("+")) {
            const Token& t = next();
            auto node = make_expr(Expr::Kind::Unary, t.offset);
            node->name = t.text;
            node->a = parse_unary_operand();
            return node;
        }
        return parse_postfix(parse_primary());
    }

    ExprPtr parse_primary()
    {
        const Token& t = peek();
        switch (t.type) {
        case T::String: {
            auto e = make_expr(Expr::Kind::Literal, t.offset);
            std::string s = next().text;
            while (peek().type == T::String) // adjacent literals join, as in Python
                s += next().text;
            e->value = Value(std::move(s));
            return e;
        }
        case T::Int: {
            auto e = make_expr(Expr::Kind::Literal, t.offset);
            std::int64_t v = 0;
            const std::string& digits = next().text;
            const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
            if (r.ec != std::errc())
                e->value = Value(std::strtod(digits.c_str(), nullptr)); // too large for 64 bits
            else
                e->value = Value(v);
            return e;
        }
        case T::Float: {
            auto e = make_expr(Expr::Kind::Literal, t.offset);
            e->value = Value(std::strtod(next().text.c_str(), nullptr));
            return e;
        }
        case T::Name: {
            const std::string& n = t.text;
            auto e = make_expr(Expr::Kind::Literal, t.offset);
            if (n == "true" || n == "True")
                e->value = Value(true);
            else if (n == "false" || n == "False")
                e->value = Value(false);
            else if (n == "none" || n == "None")
                e->value = Value::none();
            else {
                e->kind = Expr::Kind::Name;
                e->name = n;
            }
            ++m_pos;
            return e;
        }
        case T::Operator:
            if (t.text == "(")
                return parse_parenthesized();
            if (t.text == "[")
                return parse_list();
            if (t.text == "{")
                return parse_dict();
            break;
        default:
            break;
        }
        unexpected("an expression");
    }

    ExprPtr parse_parenthesized()
    {
        const std::size_t offset = next().offset;
        if (accept_op(")"))
            return make_expr(Expr::Kind::Tuple, offset);
        ExprPtr first = parse_expression();
        if (accept_op(")"))
            return first;
        auto tuple = make_expr(Expr::Kind::Tuple, offset);
        tuple->items.push_back(std::move(first));
        while (accept_op(",")) {
            if (at_op(")"))
                break;
            tuple->items.push_back(parse_expression());
        }
        expect_op(")");
        return tuple;
    }
    ExprPtr parse_list()
    {
        auto e = make_expr(Expr::Kind::List, next().offset);
        while (!accept_op("]")) {
            if (!e->items.empty()) {
                expect_op(",");
                if (accept_op("]"))
                    break;
            }
            e->items.push_back(parse_expression());
        }
        return e;
    }
    ExprPtr parse_dict()
    {
        auto e = make_expr(Expr::Kind::Dict, next().offset);
        while (!accept_op("}")) {
            if (!e->items.empty()) {
                expect_op(",");
                if (accept_op("}"))
                    break;
            }
            e->items.push_back(parse_expression());
            expect_op(":");
            e->items.push_back(parse_expression());
        }
        return e;
    }

    ExprPtr parse_postfix(ExprPtr node)
    {
        while (true) {
            const Token& t = peek();
            if (at_op(".")) {
                ++m_pos;
                auto e = make_expr(Expr::Kind::Attribute, t.offset);
                if (peek().type == T::Int) { // a.0 is a[0]
                    e->kind = Expr::Kind::Index;
                    e->b = parse_primary();
                } else {
                    e->name = expect_name();
                }
                e->a = std::move(node);
                node = std::move(e);
            } else if (at_op("[")) {
                ++m_pos;
                node = parse_subscript(std::move(node), t.offset);
            } else if (at_op("(")) {
                node = parse_call(std::move(node));
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr target, std::size_t offset)
    {
        ExprPtr parts[3];
        int part = 0;
        bool is_slice = false;
        while (!at_op("]")) {
            if (accept_op(":")) {
                is_slice = true;
                if (++part > 2)
                    unexpected("']'");
                continue;
            }
            if (parts[part])
                unexpected("':' or ']'");
            parts[part] = parse_expression();
        }
        ++m_pos;
        if (!is_slice) {
            if (!parts[0])
                fail("an empty subscript", offset);
            auto e = make_expr(Expr::Kind::Index, offset);
            e->a = std::move(target);
            e->b = std::move(parts[0]);
            return e;
        }
        auto e = make_expr(Expr::Kind::Slice, offset);
        e->a = std::move(target);
        for (auto& p : parts)
            e->items.push_back(std::move(p));
        return e;
    }

    // Arguments of a call, a filter or a test: positional, then name=value.
    void parse_arguments(Expr& e)
    {
        expect_op("(");
        while (!accept_op(")")) {
            if (!e.items.empty() || !e.keywords.empty()) {
                expect_op(",");
                if (accept_op(")"))
                    break;
            }
            if (peek().type == T::Name && at_op("=", 1)) {
                KeywordArg k;
                k.name = next().text;
                ++m_pos;
                k.value = parse_expression();
                e.keywords.push_back(std::move(k));
            } else {
                if (!e.keywords.empty())
                    fail("a positional argument follows a keyword argument", peek().offset);
                e.items.push_back(parse_expression());
            }
        }
    }

    ExprPtr parse_call(ExprPtr callee)
    {
        auto e = make_expr(Expr::Kind::Call, peek().offset);
        e->a = std::move(callee);
        parse_arguments(*e);
        return e;
    }

    // `name` or `name(args)` after a '|' (already consumed), applied to `input` (null in a filter block).
    ExprPtr parse_filter_tail(ExprPtr input)
    {
        auto e = make_expr(Expr::Kind::Filter, peek().offset);
        e->name = expect_name();
        while (at_op(".") && peek(1).type == T::Name) { // dotted filter names
            m_pos += 1;
            e->name += "." + next().text;
        }
        e->a = std::move(input);
        if (at_op("("))
            parse_arguments(*e);
        return e;
    }

    ExprPtr parse_filters_and_tests(ExprPtr node)
    {
        while (true) {
            if (accept_op("|")) {
                node = parse_filter_tail(std::move(node));
            } else if (at_name("is")) {
                auto e = make_expr(Expr::Kind::Test, next().offset);
                e->negated = accept_name("not");
                e->name = expect_name();
                e->a = std::move(node);
                if (at_op("(")) {
                    parse_arguments(*e);
                } else if (starts_test_argument()) { // `is sameas false`, `is divisibleby 3`
                    e->items.push_back(parse_postfix(parse_primary()));
                }
                node = std::move(e);
            } else {
                return node;
            }
        }
    }
    bool starts_test_argument() const
    {
        const Token& t = peek();
        if (t.type == T::String || t.type == T::Int || t.type == T::Float)
            return true;
        if (t.type == T::Name)
            return t.text != "else" && t.text != "or" && t.text != "and" && t.text != "if" && t.text != "in" &&
                   t.text != "not" && t.text != "is";
        return t.type == T::Operator && (t.text == "[" || t.text == "{");
    }

    const std::vector<Token>& m_tokens;
    std::string_view m_source;
    std::size_t m_pos = 0;
    int m_depth = 0;
};

} // namespace

Body parse_template(const std::vector<Token>& tokens, std::string_view source)
{
    return Parser(tokens, source).parse_all();
}

} // namespace engine::jinja
