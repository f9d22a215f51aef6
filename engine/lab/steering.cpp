// SPDX-License-Identifier: GPL-3.0-or-later
#include "lab/steering.h"

#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "util/error.h"

#include <cstring>
#include <spdlog/fmt/fmt.h>

namespace engine {

SteeringVector steering_vector(Backend& backend, std::span<const TokenId> plus, std::span<const TokenId> minus,
                               uint32_t layer)
{
    const ModelConfig& c = backend.model().config();
    if (layer == 0 || layer >= c.n_layer)
        throw Error(fmt::format("steering layer {}: choose 1 … {} (llama.cpp's control vectors never steer layer 0)",
                                layer, c.n_layer - 1));
    if (plus.empty() || minus.empty())
        throw Error("steering needs two prompts; one of them is empty");
    CaptureRequest capture;
    capture.residuals = true;
    const auto last_row = [&](std::span<const TokenId> tokens) {
        const LabRun r = run_fresh(backend, tokens, &capture);
        const std::vector<float>& rows = r.captures->residuals[layer];
        return std::vector<float>(rows.end() - c.n_embd, rows.end());
    };
    const std::vector<float> p = last_row(plus), m = last_row(minus);
    SteeringVector v;
    v.layer = layer;
    v.direction.resize(c.n_embd);
    for (uint32_t i = 0; i < c.n_embd; ++i)
        v.direction[i] = p[i] - m[i];
    return v;
}

Intervention steering_intervention(const SteeringVector& v, float strength, uint32_t first)
{
    Intervention iv;
    iv.site = Site::Residual;
    iv.layer = v.layer;
    iv.op = Intervention::Op::Add;
    iv.first = first;
    iv.count = UINT32_MAX - first;
    iv.values.resize(v.direction.size());
    for (std::size_t i = 0; i < v.direction.size(); ++i)
        iv.values[i] = v.direction[i] * strength;
    return iv;
}

void write_control_vector(const std::filesystem::path& path, const SteeringVector& v, std::string_view model_arch,
                          uint32_t n_layer, float strength)
{
    gguf::GgufWriter w;
    w.set_string("general.architecture", "controlvector");
    w.set_string("controlvector.model_hint", model_arch);
    w.set_i32("controlvector.layer_count", int32_t(n_layer));
    std::vector<std::byte> data(v.direction.size() * sizeof(float));
    for (std::size_t i = 0; i < v.direction.size(); ++i) {
        const float x = v.direction[i] * strength;
        std::memcpy(data.data() + i * sizeof(float), &x, sizeof(float));
    }
    const uint64_t dims[1] = {v.direction.size()};
    w.add_tensor(fmt::format("direction.{}", v.layer), GgmlType::F32, dims, std::move(data));
    w.write(path);
}

} // namespace engine
