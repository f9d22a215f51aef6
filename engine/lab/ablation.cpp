// SPDX-License-Identifier: GPL-3.0-or-later
#include "lab/ablation.h"

#include "model/model.h"
#include "util/error.h"

#include <spdlog/fmt/fmt.h>

namespace engine {

std::string_view ablation_mode_name(AblationMode mode)
{
    switch (mode) {
    case AblationMode::Zero:
        return "zero";
    case AblationMode::Mean:
        return "mean";
    case AblationMode::Resample:
        return "resample";
    }
    return "?";
}

std::optional<AblationMode> parse_ablation_mode(std::string_view name)
{
    for (AblationMode m : {AblationMode::Zero, AblationMode::Mean, AblationMode::Resample})
        if (ablation_mode_name(m) == name)
            return m;
    return std::nullopt;
}

std::vector<Intervention> head_ablations(Backend& backend, std::span<const HeadRef> heads, AblationMode mode,
                                         uint32_t n, std::span<const TokenId> reference)
{
    const ModelConfig& c = backend.model().config();
    const uint32_t D = c.head_dim_k;
    for (const HeadRef& h : heads)
        if (h.layer >= c.n_layer || h.head >= c.n_head[h.layer])
            throw Error(fmt::format("there is no head {}:{} (the model has {} layers of {} heads)", h.layer, h.head,
                                    c.n_layer, c.n_head.empty() ? 0 : c.n_head[0]));
    if (mode != AblationMode::Zero && reference.empty())
        throw Error(fmt::format("{} ablation needs a reference prompt", ablation_mode_name(mode)));
    if (mode == AblationMode::Resample && reference.size() < n)
        throw Error(fmt::format("resampling {} positions needs a second prompt of at least {} tokens (it has {})", n, n,
                                reference.size()));
    std::shared_ptr<ForwardCaptures> ref;
    if (mode != AblationMode::Zero) {
        CaptureRequest capture;
        capture.sites = {Site::HeadOut};
        ref = run_fresh(backend, reference, &capture).captures;
    }
    std::vector<Intervention> out;
    for (const HeadRef& h : heads) {
        Intervention iv;
        iv.site = Site::HeadOut;
        iv.layer = h.layer;
        iv.head = int32_t(h.head);
        iv.first = 0;
        iv.count = n;
        if (mode == AblationMode::Zero) {
            iv.values.assign(D, 0.0f);
        } else {
            const std::vector<float>& rows = ref->at(Site::HeadOut, h.layer);
            const std::size_t width = site_width(c, Site::HeadOut, h.layer);
            const auto at = [&](std::size_t t, uint32_t i) { return rows[t * width + std::size_t(h.head) * D + i]; };
            if (mode == AblationMode::Mean) {
                std::vector<double> mean(D, 0.0);
                for (std::size_t t = 0; t < reference.size(); ++t)
                    for (uint32_t i = 0; i < D; ++i)
                        mean[i] += at(t, i);
                iv.values.resize(D);
                for (uint32_t i = 0; i < D; ++i)
                    iv.values[i] = float(mean[i] / double(reference.size()));
            } else {
                iv.values.resize(std::size_t(n) * D);
                for (uint32_t t = 0; t < n; ++t)
                    for (uint32_t i = 0; i < D; ++i)
                        iv.values[std::size_t(t) * D + i] = at(t, i);
            }
        }
        out.push_back(std::move(iv));
    }
    return out;
}

} // namespace engine
