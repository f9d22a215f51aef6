// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Walks a parsed template and writes its output. Templates are untrusted input (they travel inside
// the GGUF files people download), so every rendering is bounded: the nesting of macro calls, the
// loop iterations and calls taken together, and the bytes written; passing a limit stops the
// rendering with a TemplateError that names it.

#include "chat/jinja/jinja_ast.h"

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace engine::jinja {

struct RenderLimits {
    std::size_t max_output_bytes = 16u << 20; // a prompt of 16 MiB is far past any context window
    std::uint64_t max_steps = 10'000'000;     // loop iterations + calls: quadratic templates over long chats
    int max_call_depth = 100;                 // nested macro calls (recursion)
};

class Interpreter {
public:
    // `now` is what strftime_now() formats (seconds since the epoch, formatted in UTC).
    Interpreter(std::string_view source, const RenderLimits& limits, std::time_t now);

    // Renders `body` with `globals` as the outermost scope.
    std::string render(const Body& body, const Object& globals);

    // ---- used by the built-ins ----
    std::time_t now() const { return m_now; }
    const RenderLimits& limits() const { return m_limits; }
    void count_step(std::size_t offset);
    // Calls a callable value (a built-in, a bound method or a macro).
    Value call(const Value& callee, CallArgs& args, std::size_t offset);
    [[noreturn]] void fail(const std::string& what, std::size_t offset) const;

private:
    enum class Flow { Normal, Break, Continue };
    using Scope = std::unordered_map<std::string, Value>;

    Flow exec_body(const Body& body, std::string& out);
    Flow exec(const Node& node, std::string& out);
    void exec_if(const Node& node, std::string& out, Flow& flow);
    Flow exec_for(const Node& node, std::string& out);
    void exec_set(const Node& node);
    void assign(const std::vector<std::string>& targets, const Value& value, std::size_t offset);
    Value make_macro(const Node& node);
    Value invoke_macro(const Node& node, CallArgs& args, std::size_t offset);
    std::string render_captured(const Body& body);

    Value eval(const Expr& e);
    Value eval_binary(const Expr& e);
    // Lenient, as llama.cpp is: a missing attribute or item is undefined, never an error.
    Value eval_attribute(const Value& target, const std::string& name);
    Value eval_index(const Value& target, const Value& index);
    Value eval_slice(const Expr& e);
    Value eval_filter(const Expr& e, const Value* block_input);
    CallArgs eval_arguments(const Expr& e);

    const Value* lookup(const std::string& name) const;
    void write(std::string& out, std::string_view text, std::size_t offset);

    std::string_view m_source;
    RenderLimits m_limits;
    std::time_t m_now;
    std::vector<Scope> m_scopes;
    std::uint64_t m_steps = 0;
    int m_call_depth = 0;
    std::size_t m_output_bytes = 0; // across every captured body, so that nesting cannot evade the limit
};

} // namespace engine::jinja
