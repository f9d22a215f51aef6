// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/token_heat_html.h"

#include "bridge/token_text.h"
#include "widgets/colormap.h"

#include <QColor>
#include <algorithm>

namespace tokenscope::ui {

QString token_heat_html(const std::vector<AnalyzedToken>& tokens,
                        const std::function<double(const AnalyzedToken&)>& heat)
{
    QString html = "<div style='line-height:150%'>";
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const AnalyzedToken& t = tokens[i];
        const double x = std::clamp(heat(t), 0.0, 1.0);
        const QColor c = QColor::fromRgb(sequential_colour(float(1.0 - 0.85 * x)));
        if (i > 0) // lines break between words, never inside one
            html += word_break_before(tokens[i - 1].text, t.text);
        html += QString("<a href='token:%1' style='text-decoration:none;color:%2;background:%3'>%4</a>")
                    .arg(i)
                    .arg(x > 0.55 ? "#ffffff" : "#000000")
                    .arg(c.name())
                    .arg(t.text.toHtmlEscaped());
    }
    return html + "</div>";
}

} // namespace tokenscope::ui
