// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/jinja/jinja_template.h"

#include "chat/jinja/jinja_lexer.h"
#include "chat/jinja/jinja_parser.h"
#include "chat/jinja/jinja_strings.h"

namespace engine::jinja {

Template Template::parse(std::string_view source)
{
    Template t;
    auto normalized = std::make_shared<std::string>(normalize_template_source(source));
    const std::vector<Token> tokens = tokenize_template(*normalized);
    t.m_body = std::make_shared<const Body>(parse_template(tokens, *normalized));
    t.m_source = std::move(normalized);
    return t;
}

std::string Template::render(const Object& globals, std::time_t now, const RenderLimits& limits) const
{
    Object scope;
    scope.set("strftime_now", Value(Callable{"strftime_now", [now](CallArgs& a) {
                                                 return Value(format_time(now, a.get(0).to_output()));
                                             }}));
    for (const auto& [k, v] : globals.items)
        scope.set(k, v);
    Interpreter interpreter(*m_source, limits, now);
    return interpreter.render(*m_body, scope);
}

} // namespace engine::jinja
