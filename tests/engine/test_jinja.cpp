// SPDX-License-Identifier: GPL-3.0-or-later
// Our Jinja interpreter: the language as chat templates use it (each case's expected text is what
// Jinja2 with trim_blocks and lstrip_blocks renders), clear errors for what it refuses, and the
// limits that stop a hostile template. test_chat_jinja compares whole real templates with llama.cpp.
#include "chat/jinja/jinja_template.h"

#include <QTest>

using engine::jinja::Array;
using engine::jinja::Object;
using engine::jinja::RenderLimits;
using engine::jinja::Template;
using engine::jinja::TemplateError;
using engine::jinja::Value;

namespace {

// The globals every case renders with.
Object globals()
{
    Object user;
    user.set("role", Value("user"));
    user.set("content", Value("Hi  there"));
    Object assistant;
    assistant.set("role", Value("assistant"));
    assistant.set("content", Value("  Hello!  "));
    Object g;
    g.set("messages", Value(Array{Value(user), Value(assistant)}));
    g.set("bos_token", Value("<s>"));
    g.set("n", Value(7));
    g.set("x", Value(2.5));
    g.set("s", Value("héllo wörld"));
    g.set("items", Value(Array{Value(3), Value(1), Value(2)}));
    Object d;
    d.set("b", Value(1));
    d.set("a", Value(Array{Value("x"), Value(true), Value::none()}));
    g.set("d", Value(d));
    return g;
}

constexpr std::time_t k_now = 1773480413; // 2026-03-14 09:26:53 UTC

std::string render(const std::string& source, const RenderLimits& limits = {})
{
    return Template::parse(source).render(globals(), k_now, limits);
}

} // namespace

class TestJinja : public QObject {
    Q_OBJECT

private slots:
    void language_data()
    {
        QTest::addColumn<QString>("source");
        QTest::addColumn<QString>("expected");
        const auto row = [](const char* name, const char* source, const char* expected) {
            QTest::newRow(name) << QString::fromUtf8(source) << QString::fromUtf8(expected);
        };
        // Whitespace: trim_blocks, lstrip_blocks, '-' on either side, one trailing newline dropped.
        row("text", "plain text\n", "plain text");
        row("trim_blocks", "{% if true %}\nA\n{% endif %}\nB", "A\nB");
        row("lstrip_blocks", "X\n    {% if true %}Y{% endif %}", "X\nY");
        row("lstrip not after text", "X  {% if true %}Y{% endif %}", "X  Y");
        row("dash strips", "a  \n {{- 'b' -}} \n  c", "abc");
        row("output keeps newline", "{{ 'a' }}\nb", "a\nb");
        row("comment", "a{# note #}\nb", "ab");
        row("crlf", "a\r\nb\r\n", "a\nb");
        row("plus modifiers", "X\n    {%+ if true +%}\nY{% endif %}", "X\n    \nY");
        row("unicode escapes", "{{ '\\u00e9\\x41\\U0001F600' }}", "éA😀");
        // Expressions.
        row("arithmetic", "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }}",
            "7 3 -4 1 2 1024");
        row("division is float", "{{ 7 / 2 }} {{ 4 / 2 }}", "3.5 2.0");
        row("floats", "{{ x }} {{ x * 2 }} {{ 0.1 + 0.2 }}", "2.5 5.0 0.30000000000000004");
        row("concat", "{{ 'a' ~ n ~ [none] }}", "a7[None]");
        row("compare", "{{ 1 < 2 }} {{ 'a' == 'a' }} {{ 1 == 1.0 }} {{ n != 7 }}", "True True True False");
        row("logic", "{{ true and 'x' }} {{ false or 'y' }} {{ not none }}", "x y True");
        row("in", "{{ 'll' in 'hello' }} {{ 2 in items }} {{ 'b' in d }} {{ 5 not in items }}", "True True True True");
        row("conditional", "{{ 'yes' if n > 3 else 'no' }}{{ 'z' if false }}", "yes");
        row("list repr", "{{ [1, 'a', none, true] }} {{ d }}", "[1, 'a', None, True] {'b': 1, 'a': ['x', True, None]}");
        row("subscript", "{{ messages[0]['role'] }} {{ messages[-1].role }} {{ items[5] is defined }}",
            "user assistant False");
        row("slices", "{{ items[1:] }} {{ items[::-1] }} {{ s[:5] }} {{ s[-5:] }}", "[1, 2] [2, 1, 3] héllo wörld");
        row("undefined", "[{{ nothing }}][{{ nothing.attr }}]{{ nothing is defined }}", "[][]False");
        // Statements.
        row("for loop", "{% for m in messages %}{{ loop.index0 }}:{{ m.role }}{{ ',' if not loop.last }}{% endfor %}",
            "0:user,1:assistant");
        row("loop vars", "{% for i in items %}{{ loop.index }}{{ loop.revindex }}{{ loop.first }}{% endfor %}",
            "13True22False31False");
        row("loop prev next", "{% for i in items %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}", "-1;3-2;1-;");
        row("loop filter", "{% for i in items if i > 1 %}{{ i }}{{ loop.length }}{% endfor %}", "3222");
        row("loop else", "{% for i in [] %}x{% else %}empty{% endfor %}", "empty");
        row("loop dict", "{% for k, v in d.items() %}{{ k }}={{ v is number }};{% endfor %}", "b=True;a=False;");
        row("break continue",
            "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i "
            "}}{% endfor %}",
            "0134");
        row("set scope", "{% set a = 1 %}{% for i in items %}{% set a = i %}{% endfor %}{{ a }}", "1");
        row("namespace",
            "{% set ns = namespace(a=1) %}{% for i in items %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}", "7");
        row("block set", "{% set b %}  x{{ n }}  {% endset %}[{{ b }}][{{ b | trim }}]", "[  x7  ][x7]");
        row("macro",
            "{% macro greet(name, p='Hi') %}{{ p }} {{ name }}{% endmacro %}{{ greet('a') }}/{{ greet('b', p='Yo') }}",
            "Hi a/Yo b");
        row("elif", "{% if n < 5 %}a{% elif n < 10 %}b{% else %}c{% endif %}", "b");
        row("filter block", "{% filter upper %}abc{% endfilter %}", "ABC");
        row("call block", "{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}in{% endcall %}", "[in]");
        row("generation", "{% generation %}kept{% endgeneration %}", "kept");
        // Filters.
        row("string filters",
            "{{ '  a b  ' | trim }}|{{ 'ab' | upper }}|{{ 'hello world' | title }}|{{ 'aBC' | capitalize }}",
            "a b|AB|Hello World|Abc");
        row("length", "{{ s | length }} {{ items | length }} {{ d | count }}", "11 3 2");
        row("default", "{{ nothing | default('dflt') }} {{ '' | default('e', true) }} {{ n | d(0) }}", "dflt e 7");
        row("join map", "{{ messages | map(attribute='role') | join(', ') }}", "user, assistant");
        row("select",
            "{{ items | select('odd') | list }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }}",
            "[3, 1] 1");
        row("sort", "{{ items | sort }} {{ items | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }}",
            "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c']");
        row("first last", "{{ items | first }}{{ items | last }}{{ items | min }}{{ items | max }}{{ items | sum }}",
            "32136");
        row("int float string", "{{ '42' | int + 1 }} {{ '2.5' | float }} {{ 3 | string ~ 'x' }}", "43 2.5 3x");
        row("replace", "{{ 'a-b-c' | replace('-', '+') }}", "a+b+c");
        row("indent", "{{ 'a\nb\n\nc' | indent(2) }}", "a\n  b\n\n  c");
        row("tojson", "{{ d | tojson }}", "{\"b\": 1, \"a\": [\"x\", true, null]}");
        row("tojson indent", "{{ {'k': [1, 2]} | tojson(indent=2) }}", "{\n  \"k\": [\n    1,\n    2\n  ]\n}");
        row("tojson ascii", "{{ 'é\"\n' | tojson(ensure_ascii=true) }} {{ 'é' | tojson }}", "\"\\u00e9\\\"\\n\" \"é\"");
        row("tojson separators", "{{ {'a': 1, 'b': 2} | tojson(separators=(',', ':')) }}", "{\"a\":1,\"b\":2}");
        row("unique reverse", "{{ [1, 2, 1] | unique | list }} {{ 'abc' | reverse }}", "[1, 2] cba");
        row("dictsort items", "{{ d | dictsort }} {{ d | items | list | length }}",
            "[['a', ['x', True, None]], ['b', 1]] 2");
        // Methods.
        row("str methods",
            "{{ ' x '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b  c'.split() }}|{{ 'abc'.startswith('ab') }}",
            "x|['a', 'b', '', 'c']|['a', 'b', 'c']|True");
        row("str methods 2", "{{ 'x.y.z'.rsplit('.', 1) }} {{ '<t>x</t>'.lstrip('<t>') }} {{ '{} {}'.format(1, 'a') }}",
            "['x.y', 'z'] x</t> 1 a");
        row("list methods", "{% set l = [1] %}{% set _ = l.append(2) %}{{ l }} {{ l.pop() }} {{ l }}", "[1, 2] 2 [1]");
        row("dict methods", "{{ d.get('b') }} {{ d.get('zz', 'no') }} {{ d.keys() | list }}", "1 no ['b', 'a']");
        // Tests.
        row("tests", "{{ s is string }}{{ n is number }}{{ d is mapping }}{{ items is iterable }}{{ none is none }}",
            "TrueTrueTrueTrueTrue");
        row("tests 2", "{{ n is odd }}{{ n is divisibleby 7 }}{{ n is not even }}{{ 'ab' is lower }}{{ x is float }}",
            "TrueTrueTrueTrueTrue");
        // Globals.
        row("range", "{{ range(3) | list }} {{ range(1, 7, 2) | list }}", "[0, 1, 2] [1, 3, 5]");
        row("strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%d %b %Y') }}",
            "2026-03-14 09:26 14 Mar 2026");
        row("dict global", "{{ dict(a=1)['a'] }}", "1");
        // llama.cpp's leniency that templates rely on.
        row("none plus string", "{{ none + 'x' }}{{ nothing ~ 'y' }}{{ 'z' ~ none }}", "xyz");
    }
    void language()
    {
        QFETCH(QString, source);
        QFETCH(QString, expected);
        try {
            QCOMPARE(QString::fromStdString(render(source.toStdString())), expected);
        } catch (const TemplateError& e) {
            QFAIL(e.what());
        }
    }

    // What the interpreter refuses, each with a message that names the problem.
    void errors_data()
    {
        QTest::addColumn<QString>("source");
        QTest::addColumn<QString>("message");
        const auto row = [](const char* name, const char* source, const char* message) {
            QTest::newRow(name) << QString::fromUtf8(source) << QString::fromUtf8(message);
        };
        row("include", "{% include 'x.jinja' %}", "the tag 'include' is not supported");
        row("unclosed if", "{% if true %}x", "a block is not closed: expected 'elif' or 'else' or 'endif'");
        row("unclosed output", "{{ 1 + ", "an expression is not closed");
        row("unclosed comment", "{# x", "a comment is not closed");
        row("unclosed string", "{{ 'abc }}", "a string is not closed");
        row("raise_exception", "{{ raise_exception('Roles must alternate') }}",
            "the template raised an error: Roles must alternate");
        row("unknown filter", "{{ 1 | nosuchfilter }}", "unknown filter 'nosuchfilter'");
        row("unknown function", "{{ nosuchfunction() }}", "'nosuchfunction' is not defined");
        row("set on non-namespace", "{% set d.b = 2 %}", "'d' is not a namespace");
        row("type error", "{{ 'a' - 1 }}", "cannot apply '-' to a string and a integer");
        row("position", "line one\n{{ 1 |\n nosuch }}", "line 3, column 2");
    }
    void errors()
    {
        QFETCH(QString, source);
        QFETCH(QString, message);
        try {
            const std::string out = render(source.toStdString());
            QFAIL(qPrintable("rendered without an error: " + QString::fromStdString(out)));
        } catch (const TemplateError& e) {
            const QString what = QString::fromUtf8(e.what());
            if (!what.contains(message))
                QFAIL(qPrintable("message was: " + what));
        }
    }

    // A template is untrusted input: whatever it does, rendering stops with a message naming the limit.
    void limits_data()
    {
        QTest::addColumn<QString>("source");
        QTest::addColumn<QString>("message");
        QTest::newRow("endless loops")
            << "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
            << "loop iterations and calls (the limit";
        QTest::newRow("huge output") << "{% for a in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"
                                     << "MiB (the output limit)";
        QTest::newRow("doubling string")
            << "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
            << "MiB (the output limit)";
        QTest::newRow("string repeat") << "{{ 'x' * 10000000000 }}"
                                       << "MiB (the output limit)";
        QTest::newRow("recursion") << "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"
                                   << "deep (the limit";
        QTest::newRow("deep nesting") << QString("{{ ") + QString("(").repeated(5000) + "1" +
                                             QString(")").repeated(5000) + " }}"
                                      << "nests deeper than";
        QTest::newRow("deep blocks") << QString("{% if true %}").repeated(5000) << "nests deeper than";
        QTest::newRow("huge range") << "{{ range(10000000000) | length }}"
                                    << "range() of more than";
    }
    void limits()
    {
        QFETCH(QString, source);
        QFETCH(QString, message);
        RenderLimits limits;
        limits.max_output_bytes = 1u << 20;
        limits.max_steps = 200'000;
        try {
            render(source.toStdString(), limits);
            QFAIL("rendered without reaching a limit");
        } catch (const TemplateError& e) {
            const QString what = QString::fromUtf8(e.what());
            if (!what.contains(message))
                QFAIL(qPrintable("message was: " + what));
        }
    }

    // Lists and namespaces are shared by reference, as in Python: a template's `messages.append`
    // and `ns.x = …` inside loops and macros are seen outside them.
    void sharedReferences()
    {
        const std::string out = render("{% set l = [] %}{% macro add(x) %}{% set _ = l.append(x) %}{% endmacro %}"
                                       "{{ add(1) }}{{ add(2) }}{{ l | length }}");
        QCOMPARE(QString::fromStdString(out), QString("2"));
    }
};

QTEST_GUILESS_MAIN(TestJinja)
#include "test_jinja.moc"
