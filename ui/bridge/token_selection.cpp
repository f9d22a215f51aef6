// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/token_selection.h"

namespace tokenscope::ui {

void TokenSelection::select(int position)
{
    if (position < -1)
        position = -1;
    if (position == m_position)
        return;
    m_position = position;
    emit changed(position);
}

} // namespace tokenscope::ui
