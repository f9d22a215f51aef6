// SPDX-License-Identifier: GPL-3.0-or-later
// The routers of a mixture-of-experts model on the engine here: a pass with the routing captured,
// and the same pass with an expert intervention for "what if".
#include "bridge/experts_client.h"

#include "backend/backend.h"
#include "model/model.h"
#include "moe/expert_scan.h"
#include "session/session.h"
#include "util/error.h"
#include "widgets/count_text.h"

#include <QElapsedTimer>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

namespace tokenscope::ui {

namespace {

// Longest sequence one routing pass takes (the probabilities are n × layers × experts floats).
constexpr int kMaxRoutedTokens = 2048;

// A CPU backend of the request's own for `n_tokens` (the app's weight order and mode), apart from the
// chat's and the stepper's caches.
std::unique_ptr<engine::Backend> routing_backend(EngineContext& context, std::size_t n_tokens)
{
    return engine::make_cpu_backend(context.model, context.cpuOptions(uint32_t(n_tokens + 1)));
}

// One pass over `ids` from an empty cache, every router captured, the next token's logits kept.
struct RoutedPass {
    std::vector<float> logits; // the last position's
    std::shared_ptr<const engine::ForwardCaptures> captures;
};
RoutedPass routed_pass(engine::Backend& backend, const std::vector<int32_t>& ids,
                       std::span<const engine::ExpertIntervention> interventions)
{
    backend.kv_cache().clear();
    engine::ForwardResult r = engine::forward_routed(backend, ids, interventions);
    return {std::move(r.logits), std::move(r.captures)};
}

std::vector<int32_t> checked_ids(const std::vector<int32_t>& ids)
{
    if (ids.empty())
        throw engine::Error(QObject::tr("The text is empty: type some text to see where its tokens go.").toStdString());
    if (int(ids.size()) > kMaxRoutedTokens)
        throw engine::Error(QObject::tr("%1 tokens: the experts view takes at most %2.")
                                .arg(numberText(qint64(ids.size())), numberText(kMaxRoutedTokens))
                                .toStdString());
    return ids;
}

std::vector<double> softmax(const std::vector<float>& logits)
{
    const float mx = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(logits.size());
    double sum = 0;
    for (std::size_t i = 0; i < logits.size(); ++i)
        sum += p[i] = std::exp(double(logits[i]) - mx);
    for (double& v : p)
        v /= sum;
    return p;
}

} // namespace

ExpertsClient::ExpertsClient(EngineController& engine) : m_engine(engine)
{
    qRegisterMetaType<std::shared_ptr<const ExpertsSnapshot>>();
    qRegisterMetaType<std::shared_ptr<const ExpertWhatIfSnapshot>>();
    qRegisterMetaType<std::shared_ptr<const ExpertScanSnapshot>>();
    connect(this, &ExpertsClient::scanFinished, this, [this](const std::shared_ptr<const ExpertScanSnapshot>& s) {
        if (s->request_id == m_scan)
            m_scan = 0;
    });
}

void ExpertsClient::stopScan()
{
    if (m_scan)
        m_engine.cancel(m_scan);
}

quint64 ExpertsClient::scan(const std::vector<int32_t>& ids, bool zero)
{
    stopScan();
    if (m_engine.remote())
        return m_scan = m_engine.refuse(this, &ExpertsClient::scanFinished, tr("The expert scan"));
    ExpertsClient* client = this;
    return m_scan = m_engine.request(
               this, &ExpertsClient::scanFinished,
               [client, ids, zero](EngineContext& context, const RequestBook::Ticket& ticket) {
                   using clock = std::chrono::steady_clock;
                   auto s = std::make_shared<ExpertScanSnapshot>();
                   s->zero = zero;
                   context.requireModel();
                   const engine::ModelConfig& c = context.model->config();
                   if (!c.is_moe())
                       throw engine::Error(tr("This model is dense: it has no experts to scan.").toStdString());
                   checked_ids(ids);
                   s->n_expert = int(c.n_expert);
                   const auto backend = routing_backend(context, ids.size());
                   const auto t0 = clock::now();
                   auto last_post = t0;
                   const auto post = [&](int done) {
                       auto live = std::make_shared<ExpertScanSnapshot>(*s);
                       live->request_id = ticket.id;
                       live->done = done;
                       live->elapsed_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
                       EngineController::toUi(client, [client, live] { emit client->scanProgress(live); });
                   };
                   const engine::ExpertScan scan = engine::scan_experts(
                       *backend, ids,
                       zero ? engine::ExpertIntervention::Kind::ZeroOutput : engine::ExpertIntervention::Kind::Remove,
                       [&](uint32_t passes, double estimated_ms) {
                           s->planned = int(passes);
                           s->estimated_ms = estimated_ms;
                           post(0);
                       },
                       [&](uint32_t done, uint32_t) {
                           if (ticket.cancel->load())
                               return false;
                           if (clock::now() - last_post > std::chrono::milliseconds(150)) {
                               last_post = clock::now();
                               post(int(done));
                           }
                           return true;
                       });
                   std::map<uint32_t, std::size_t> index;
                   for (const auto& e : scan.effects)
                       if (index.emplace(e.layer, index.size()).second)
                           s->moe_layers.push_back(int(e.layer));
                   s->kl.assign(s->moe_layers.size(),
                                std::vector<double>(c.n_expert, std::numeric_limits<double>::quiet_NaN()));
                   for (const auto& e : scan.effects)
                       if (!e.tokens || e.ran) // no token chose it: removing it changes no bit
                           s->kl[index[e.layer]][e.expert] = e.ran ? e.kl : 0.0;
                   s->token = context.tokensOf({scan.token}, 0).front().text;
                   s->done = int(scan.runs);
                   s->cancelled = scan.cancelled;
                   s->finished = !scan.cancelled;
                   s->elapsed_ms = scan.ms;
                   return s;
               });
}

quint64 ExpertsClient::route(const QString& text, bool current_sequence)
{
    if (m_route)
        m_engine.cancel(m_route); // a newer text replaces the one still waiting
    if (m_engine.remote())
        return m_route = m_engine.refuse(this, &ExpertsClient::routed, tr("The experts view"));
    return m_route = m_engine.request(
               this, &ExpertsClient::routed,
               [text, current_sequence](EngineContext& context, const RequestBook::Ticket& ticket) {
                   auto s = std::make_shared<ExpertsSnapshot>();
                   s->source = current_sequence ? "sequence" : "prompt";
                   if (ticket.cancel->load()) {
                       s->cancelled = true;
                       return s;
                   }
                   context.requireModel();
                   const engine::Model& model = *context.model;
                   const engine::ModelConfig& c = model.config();
                   const EngineContext::ViewedTokens viewed = context.viewedTokens(
                       text, current_sequence,
                       tr("The model has no sequence yet: chat or step first, or type a text here."),
                       tr("The text is empty: type some text to see where its tokens go."));
                   const std::vector<int32_t>& ids = viewed.ids;
                   const int prompt_length = viewed.prompt_length;
                   s->ids = checked_ids(ids);
                   s->tokens = context.tokensOf(s->ids, prompt_length);
                   s->architecture = QString::fromStdString(c.architecture);
                   s->n_layers = int(c.n_layer);
                   if (!c.is_moe()) {
                       s->dense = true;
                       return s;
                   }
                   s->n_expert = int(c.n_expert);
                   s->k = int(c.n_expert_used);
                   s->normalized = model.traits().moe_normalize_weights;
                   s->random_weights = std::string(model.file().get_string("general.description").value_or(""))
                                           .starts_with("Random weights");
                   QElapsedTimer timer;
                   timer.start();
                   const RoutedPass pass = routed_pass(*routing_backend(context, s->ids.size()), s->ids, {});
                   s->ms = double(timer.nsecsElapsed()) / 1e6;
                   for (const engine::RoutingCapture& rc : pass.captures->routing) {
                       s->moe_layers.push_back(int(rc.layer));
                       s->experts.push_back(rc.experts);
                       s->weights.push_back(rc.weights);
                       s->probabilities.push_back(rc.probs);
                   }
                   return s;
               });
}

quint64 ExpertsClient::whatIf(const std::vector<int32_t>& ids, const ExpertWhatIf& what)
{
    if (m_what_if)
        m_engine.cancel(m_what_if);
    if (m_engine.remote())
        return m_what_if = m_engine.refuse(this, &ExpertsClient::whatIfReady, tr("The experts view"));
    return m_what_if = m_engine.request(
               this, &ExpertsClient::whatIfReady, [ids, what](EngineContext& context, const RequestBook::Ticket&) {
                   auto s = std::make_shared<ExpertWhatIfSnapshot>();
                   s->what = what;
                   context.requireModel();
                   const engine::Model& model = *context.model;
                   const engine::ModelConfig& c = model.config();
                   if (!c.is_moe())
                       throw engine::Error(tr("This model is dense: it has no router to change.").toStdString());
                   if (what.expert < 0 || what.expert >= int(c.n_expert))
                       throw engine::Error(tr("Expert %1 does not exist: the model has %2 (0 … %3).")
                                               .arg(what.expert)
                                               .arg(c.n_expert)
                                               .arg(c.n_expert - 1)
                                               .toStdString());
                   checked_ids(ids);
                   QElapsedTimer timer;
                   timer.start();
                   const auto backend = routing_backend(context, ids.size()); // both passes on one
                   const RoutedPass before = routed_pass(*backend, ids, {});
                   using Kind = engine::ExpertIntervention::Kind;
                   std::vector<engine::ExpertIntervention> change;
                   const QString where = what.layer < 0 ? tr("every layer") : tr("layer %1").arg(what.layer);
                   if (what.kind == ExpertWhatIf::Kind::Force) {
                       if (what.position < 0 || what.position >= int(ids.size()))
                           throw engine::Error(tr("Pick a token to force the expert for.").toStdString());
                       for (const engine::RoutingCapture& rc : before.captures->routing) {
                           if (what.layer >= 0 && int(rc.layer) != what.layer)
                               continue;
                           const auto* chosen = rc.experts.data() + std::size_t(what.position) * rc.k;
                           std::vector<uint32_t> experts(chosen, chosen + rc.k);
                           if (std::find(experts.begin(), experts.end(), uint32_t(what.expert)) != experts.end())
                               continue;                           // already there: nothing to force
                           experts.back() = uint32_t(what.expert); // the lowest-weighted slot gives way
                           engine::ExpertIntervention iv;
                           iv.kind = Kind::Force;
                           iv.layer = int32_t(rc.layer);
                           iv.first = uint32_t(what.position);
                           iv.count = 1;
                           iv.experts = std::move(experts);
                           change.push_back(std::move(iv));
                       }
                       s->description =
                           tr("expert %1 forced for token %2 in %3").arg(what.expert).arg(what.position).arg(where);
                   } else {
                       engine::ExpertIntervention iv;
                       iv.kind = what.kind == ExpertWhatIf::Kind::Remove ? Kind::Remove : Kind::ZeroOutput;
                       iv.layer = what.layer < 0 ? engine::ExpertIntervention::kAllLayers : what.layer;
                       iv.experts = {uint32_t(what.expert)};
                       change.push_back(std::move(iv));
                       s->description =
                           what.kind == ExpertWhatIf::Kind::Remove
                               ? tr("expert %1 removed from %2 (the next best take its place)")
                                     .arg(what.expert)
                                     .arg(where)
                               : tr("expert %1's output zeroed in %2 (its route kept)").arg(what.expert).arg(where);
                   }
                   const RoutedPass after = change.empty() ? before : routed_pass(*backend, ids, change);
                   s->ms = double(timer.nsecsElapsed()) / 1e6;
                   if (change.empty())
                       s->description += tr(" — the router had chosen it already: nothing changes");
                   for (std::size_t i = 0; i < before.captures->routing.size(); ++i) {
                       const auto& a = before.captures->routing[i];
                       const auto& b = after.captures->routing[i];
                       for (uint32_t t = 0; t < a.n_tokens; ++t)
                           s->rerouted += !std::equal(a.experts.begin() + t * a.k, a.experts.begin() + (t + 1) * a.k,
                                                      b.experts.begin() + t * b.k);
                   }
                   const std::vector<double> p = softmax(before.logits), q = softmax(after.logits);
                   for (std::size_t i = 0; i < p.size(); ++i)
                       if (p[i] > 0 && q[i] > 0)
                           s->kl += p[i] * std::log(p[i] / q[i]);
                   std::vector<int> order(p.size());
                   std::iota(order.begin(), order.end(), 0);
                   std::vector<int> top;
                   for (const std::vector<double>* d : {&p, &q}) {
                       const auto shown = std::ptrdiff_t(std::min<std::size_t>(10, order.size()));
                       std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                                         [&](int x, int y) { return (*d)[x] > (*d)[y]; });
                       for (std::ptrdiff_t j = 0; j < shown; ++j)
                           if (std::find(top.begin(), top.end(), order[j]) == top.end())
                               top.push_back(order[j]);
                   }
                   std::sort(top.begin(), top.end(), [&](int x, int y) { return p[x] > p[y]; });
                   for (const int id : top) {
                       ExpertWhatIfSnapshot::Candidate cand;
                       cand.id = id;
                       cand.text = context.tokensOf({id}, 0).front().text;
                       cand.p_before = p[id];
                       cand.p_after = q[id];
                       s->candidates.push_back(cand);
                   }
                   return s;
               });
}

} // namespace tokenscope::ui
