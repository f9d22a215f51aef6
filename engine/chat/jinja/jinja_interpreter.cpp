// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/jinja/jinja_interpreter.h"

#include "chat/jinja/jinja_builtins.h"
#include "chat/jinja/jinja_lexer.h"

#include <cmath>
#include <limits>

namespace engine::jinja {

Interpreter::Interpreter(std::string_view source, const RenderLimits& limits, std::time_t now)
    : m_source(source), m_limits(limits), m_now(now)
{
}

void Interpreter::fail(const std::string& what, std::size_t offset) const
{
    throw TemplateError(what + " (" + source_position(m_source, offset) + ")");
}

void Interpreter::count_step(std::size_t offset)
{
    if (++m_steps > m_limits.max_steps)
        fail("the template ran more than " + std::to_string(m_limits.max_steps) +
                 " loop iterations and calls (the limit; it may loop without end)",
             offset);
}

void Interpreter::write(std::string& out, std::string_view text, std::size_t offset)
{
    m_output_bytes += text.size();
    if (m_output_bytes > m_limits.max_output_bytes)
        fail("the template wrote more than " + std::to_string(m_limits.max_output_bytes >> 20) +
                 " MiB (the output limit)",
             offset);
    out += text;
}

std::string Interpreter::render(const Body& body, const Object& globals)
{
    m_scopes.clear();
    m_scopes.emplace_back();
    for (const auto& [k, v] : globals.items)
        m_scopes.back()[k] = v;
    m_steps = 0;
    m_output_bytes = 0;
    std::string out;
    exec_body(body, out);
    return out;
}

const Value* Interpreter::lookup(const std::string& name) const
{
    for (auto it = m_scopes.rbegin(); it != m_scopes.rend(); ++it) {
        auto found = it->find(name);
        if (found != it->end())
            return &found->second;
    }
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------------------------

Interpreter::Flow Interpreter::exec_body(const Body& body, std::string& out)
{
    for (const auto& node : body) {
        const Flow flow = exec(*node, out);
        if (flow != Flow::Normal)
            return flow;
    }
    return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Node& node, std::string& out)
{
    switch (node.kind) {
    case Node::Kind::Text:
        write(out, node.text, node.offset);
        return Flow::Normal;
    case Node::Kind::Output: {
        const Value v = eval(*node.expr);
        write(out, v.to_output(), node.offset);
        return Flow::Normal;
    }
    case Node::Kind::If: {
        Flow flow = Flow::Normal;
        exec_if(node, out, flow);
        return flow;
    }
    case Node::Kind::For:
        return exec_for(node, out);
    case Node::Kind::Set:
        exec_set(node);
        return Flow::Normal;
    case Node::Kind::Macro:
        m_scopes.back()[node.text] = make_macro(node);
        return Flow::Normal;
    case Node::Kind::CallBlock: {
        // The body becomes `caller`, a macro without a name, passed to the called macro.
        const Expr& call = *node.expr;
        const Value callee = eval(*call.a);
        CallArgs args = eval_arguments(call);
        const Node* block = &node;
        args.keyword.emplace_back("caller", Value(Callable{"caller", [this, block](CallArgs& a) {
                                                               return invoke_macro(*block, a, block->offset);
                                                           }}));
        write(out, this->call(callee, args, call.offset).to_output(), node.offset);
        return Flow::Normal;
    }
    case Node::Kind::FilterBlock: {
        const Value input(render_captured(node.body));
        write(out, eval_filter(*node.expr, &input).to_output(), node.offset);
        return Flow::Normal;
    }
    case Node::Kind::Break:
        return Flow::Break;
    case Node::Kind::Continue:
        return Flow::Continue;
    case Node::Kind::Generation:
        return exec_body(node.body, out);
    }
    return Flow::Normal;
}

void Interpreter::exec_if(const Node& node, std::string& out, Flow& flow)
{
    for (std::size_t i = 0; i < node.conditions.size(); ++i)
        if (eval(*node.conditions[i]).truthy()) {
            flow = exec_body(node.bodies[i], out);
            return;
        }
    flow = exec_body(node.else_body, out);
}

namespace {

// What `for` iterates over: a list's items, a dict's keys, a string's characters.
Array iteration_items(const Value& v)
{
    if (v.is_array())
        return v.as_array(); // a copy: the body may append to the list it walks
    if (v.is_object()) {
        Array keys;
        for (const auto& [k, unused] : v.as_object().items)
            keys.push_back(v.as_object().key_value(k));
        return keys;
    }
    if (v.is_string()) {
        Array chars;
        const std::string& s = v.as_string();
        const auto offsets = utf8_offsets(s);
        for (std::size_t i = 0; i + 1 < offsets.size(); ++i)
            chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
        return chars;
    }
    return {};
}

} // namespace

Interpreter::Flow Interpreter::exec_for(const Node& node, std::string& out)
{
    if (node.recursive)
        fail("recursive loops are not supported", node.offset);
    const Value iterable = eval(*node.expr);
    if (!iterable.is_array() && !iterable.is_object() && !iterable.is_string() && !iterable.is_undefined() &&
        !iterable.is_none())
        fail("cannot loop over a " + std::string(iterable.type_name()), node.expr->offset);
    Array items = iteration_items(iterable);

    m_scopes.emplace_back();
    // `for x in xs if cond`: the condition filters before loop.index and loop.length are counted.
    if (node.filter) {
        Array kept;
        for (const Value& item : items) {
            count_step(node.offset);
            assign(node.targets, item, node.offset);
            if (eval(*node.filter).truthy())
                kept.push_back(item);
        }
        items = std::move(kept);
    }
    const std::size_t n = items.size();
    for (std::size_t i = 0; i < n; ++i) {
        count_step(node.offset);
        assign(node.targets, items[i], node.offset);
        Object loop;
        loop.set("index", Value(static_cast<std::int64_t>(i + 1)));
        loop.set("index0", Value(static_cast<std::int64_t>(i)));
        loop.set("revindex", Value(static_cast<std::int64_t>(n - i)));
        loop.set("revindex0", Value(static_cast<std::int64_t>(n - i - 1)));
        loop.set("first", Value(i == 0));
        loop.set("last", Value(i + 1 == n));
        loop.set("length", Value(static_cast<std::int64_t>(n)));
        loop.set("depth", Value(1));
        loop.set("depth0", Value(0));
        loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("loop.previtem"));
        loop.set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem"));
        loop.set("cycle", Value(Callable{"loop.cycle", [i](CallArgs& a) {
                                             return a.positional.empty() ? Value()
                                                                         : a.positional[i % a.positional.size()];
                                         }}));
        m_scopes.back()["loop"] = Value(std::move(loop));
        const Flow flow = exec_body(node.body, out);
        if (flow == Flow::Break)
            break;
    }
    m_scopes.pop_back();
    if (n == 0)
        return exec_body(node.else_body, out);
    return Flow::Normal;
}

void Interpreter::assign(const std::vector<std::string>& targets, const Value& value, std::size_t offset)
{
    if (targets.size() == 1) {
        m_scopes.back()[targets[0]] = value;
        return;
    }
    Array parts;
    if (value.is_array())
        parts = value.as_array();
    else if (value.is_string() || value.is_object())
        parts = iteration_items(value);
    if (parts.size() != targets.size())
        fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) +
                 " names",
             offset);
    for (std::size_t i = 0; i < targets.size(); ++i)
        m_scopes.back()[targets[i]] = parts[i];
}

void Interpreter::exec_set(const Node& node)
{
    if (!node.text.empty()) { // set ns.attr = value
        const Value* target = lookup(node.targets[0]);
        if (!target || !target->is_object() || !target->as_object().is_namespace)
            fail("'" + node.targets[0] + "' is not a namespace: only namespace() objects take 'set " + node.targets[0] +
                     "." + node.text + " = …'",
                 node.offset);
        target->as_object().set(node.text, eval(*node.expr));
        return;
    }
    if (node.expr) {
        assign(node.targets, eval(*node.expr), node.offset);
        return;
    }
    Value captured(render_captured(node.body));
    if (node.filter)
        captured = eval_filter(*node.filter, &captured);
    m_scopes.back()[node.targets[0]] = captured;
}

std::string Interpreter::render_captured(const Body& body)
{
    std::string captured;
    exec_body(body, captured);
    return captured;
}

Value Interpreter::make_macro(const Node& node)
{
    const Node* macro = &node;
    return Value(Callable{node.text, [this, macro](CallArgs& a) { return invoke_macro(*macro, a, macro->offset); }});
}

Value Interpreter::invoke_macro(const Node& node, CallArgs& args, std::size_t offset)
{
    count_step(offset);
    if (m_call_depth >= m_limits.max_call_depth)
        fail("macros call each other more than " + std::to_string(m_limits.max_call_depth) +
                 " deep (the limit; the template may recurse without end)",
             offset);
    Scope scope;
    Array varargs;
    for (std::size_t i = 0; i < args.positional.size(); ++i) {
        if (i < node.params.size())
            scope[node.params[i].name] = args.positional[i];
        else
            varargs.push_back(args.positional[i]);
    }
    Object kwargs;
    for (auto& [name, value] : args.keyword) {
        bool is_param = name == "caller";
        for (const auto& p : node.params)
            is_param = is_param || p.name == name;
        if (is_param)
            scope[name] = value;
        else
            kwargs.set(name, value);
    }
    scope["varargs"] = Value(std::move(varargs));
    scope["kwargs"] = Value(std::move(kwargs));
    // Scope from the caller's side: defaults are evaluated with the parameters before them bound.
    m_scopes.push_back(std::move(scope));
    ++m_call_depth;
    for (const auto& p : node.params)
        if (!m_scopes.back().count(p.name))
            m_scopes.back()[p.name] = p.default_value ? eval(*p.default_value) : Value::undefined(p.name);
    std::string out;
    try {
        exec_body(node.body, out);
    } catch (...) {
        --m_call_depth;
        m_scopes.pop_back();
        throw;
    }
    --m_call_depth;
    m_scopes.pop_back();
    return Value(std::move(out));
}

Value Interpreter::call(const Value& callee, CallArgs& args, std::size_t offset)
{
    if (!callee.is_callable()) {
        if (callee.is_undefined() && !callee.undefined_name().empty())
            fail("'" + callee.undefined_name() + "' is not defined (no such function)", offset);
        fail("a " + std::string(callee.type_name()) + " cannot be called", offset);
    }
    try {
        return callee.as_callable().call(args);
    } catch (const TemplateError& e) {
        const std::string what = e.what();
        if (what.find("(line ") != std::string::npos)
            throw;
        fail(what, offset);
    }
}

} // namespace engine::jinja
