// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The parsed template: expressions and statements as plain tagged structs, owned by unique_ptr.
// The interpreter walks them; nothing here evaluates.

#include "chat/jinja/jinja_value.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace engine::jinja {

struct Expr;
struct Node;
using ExprPtr = std::unique_ptr<Expr>;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct KeywordArg {
    std::string name;
    ExprPtr value;
};

struct Expr {
    enum class Kind {
        Literal,     // value
        Name,        // name
        List,        // items
        Tuple,       // items
        Dict,        // items (key, value, key, value, …)
        Attribute,   // a.name
        Index,       // a[b]
        Slice,       // a[b:c:d] (items: start, stop, step; null where left out)
        Call,        // a(items…, keywords…)
        Filter,      // a | name(items…, keywords…)
        Test,        // a is [not] name(items…)
        Unary,       // op a   ("not", "-", "+")
        Binary,      // a op b
        Conditional, // a if b else c (c may be null)
    };
    Kind kind;
    std::size_t offset = 0;
    Value value;          // Literal
    std::string name;     // Name, Attribute, Filter, Test; the operator for Unary and Binary
    bool negated = false; // Test
    ExprPtr a, b, c;
    std::vector<ExprPtr> items;
    std::vector<KeywordArg> keywords;
};

struct MacroParam {
    std::string name;
    ExprPtr default_value; // null: required
};

struct Node {
    enum class Kind {
        Text,        // text
        Output,      // {{ expr }}
        If,          // conditions[i] → bodies[i]; else_body
        For,         // for targets in expr [if filter] body [else else_body]
        Set,         // set targets = expr; or set ns.attr = expr (attribute); or a block set (body)
        Macro,       // macro name(params) body
        CallBlock,   // call(params) expr body
        FilterBlock, // filter expr(body): expr is a Filter whose a is null
        Break,
        Continue,
        Generation, // generation body (renders the body, as Hugging Face's AssistantTracker does)
    };
    Kind kind;
    std::size_t offset = 0;
    std::string text;                 // Text; Macro's name; Set's attribute
    ExprPtr expr;                     // Output, For's iterable, Set's value or namespace, CallBlock's call, FilterBlock
    ExprPtr filter;                   // For's inline condition
    std::vector<std::string> targets; // For, Set
    std::vector<ExprPtr> conditions;  // If
    std::vector<Body> bodies;         // If
    Body body;                        // For, Set (block), Macro, CallBlock, FilterBlock, Generation
    Body else_body;                   // If, For
    std::vector<MacroParam> params;   // Macro, CallBlock
    bool recursive = false;           // For
};

} // namespace engine::jinja
