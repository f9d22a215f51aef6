// SPDX-License-Identifier: GPL-3.0-or-later
// The model library scanner on a home directory built in the test: Tokenscope's own directory,
// a Hugging Face cache with snapshot links into blobs, LM Studio (with a link back to itself),
// Ollama blobs named by manifests, recent files; names, sources, sizes, headers, errors, dedup; and
// each rule of the base/instruct label on files that carry the metadata it reads.
#include "gguf/gguf_file.h"
#include "gguf_builder.h"
#include "model/model_discovery.h"
#include "model/model_kind.h"

#include <QStringList>
#include <QTemporaryDir>
#include <QTest>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

namespace fs = std::filesystem;
using engine::DiscoveredModel;
using OptionalText = std::optional<std::string>; // a metadata value, or absent
Q_DECLARE_METATYPE(OptionalText)
using testsupport::GgufBuilder;

namespace {

constexpr uint32_t kTypeF32 = 0;
constexpr uint32_t kTypeQ8_0 = 8;

// A small valid GGUF: one F32 tensor, plus a larger Q8_0 one when asked (the dominant type).
std::vector<uint8_t> model_bytes(const std::string& arch, std::optional<uint32_t> file_type, bool q8_tensor = false)
{
    GgufBuilder b;
    b.add_string("general.architecture", arch);
    if (file_type)
        b.add_u32("general.file_type", *file_type);
    b.add_tensor({"norm.weight", kTypeF32, {4}, std::vector<uint8_t>(16, 0)});
    if (q8_tensor)
        b.add_tensor({"token_embd.weight", kTypeQ8_0, {32, 2}, std::vector<uint8_t>(2 * 34, 0)});
    return b.build();
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& bytes)
{
    fs::create_directories(p.parent_path());
    QVERIFY(testsupport::write_file(p.string(), bytes));
}

void write_text(const fs::path& p, const std::string& text)
{
    write_bytes(p, std::vector<uint8_t>(text.begin(), text.end()));
}

std::string ollama_manifest(const std::string& model_digest, const std::string& config_digest)
{
    return R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",)"
           R"("config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":")" +
           config_digest + R"(","size":10},"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":")" +
           model_digest + R"(","size":100},{"mediaType":"application/vnd.ollama.image.template","digest":")" +
           config_digest + R"(","size":10}]})";
}

// A small valid GGUF with the metadata the base/instruct rules read (absent when nullopt).
std::vector<uint8_t> named_model_bytes(std::optional<std::string> finetune, std::optional<std::string> name,
                                       std::optional<std::string> basename, std::optional<std::string> chat_template)
{
    GgufBuilder b;
    b.add_string("general.architecture", "llama");
    if (finetune)
        b.add_string("general.finetune", *finetune);
    if (name)
        b.add_string("general.name", *name);
    if (basename)
        b.add_string("general.basename", *basename);
    if (chat_template)
        b.add_string("tokenizer.chat_template", *chat_template);
    b.add_tensor({"norm.weight", kTypeF32, {4}, std::vector<uint8_t>(16, 0)});
    return b.build();
}

const DiscoveredModel* find(const std::vector<DiscoveredModel>& models, const std::string& source,
                            const std::string& name)
{
    for (const DiscoveredModel& m : models)
        if (m.source == source && m.display_name == name)
            return &m;
    return nullptr;
}

} // namespace

class TestModelDiscovery : public QObject {
    Q_OBJECT
private slots:
    void init();
    void cleanup();
    void defaultRootsFollowHomeAndXdg();
    void scansEveryLayout();
    void missingRootsAreFine();
    void fileTypeNames();
    void modelKindRules_data();
    void modelKindRules();

private:
    void build_home();

    std::optional<QTemporaryDir> m_dir;
    fs::path m_home;
    std::map<std::string, std::optional<std::string>> m_saved_env;
    std::map<std::string, std::vector<uint8_t>> m_bytes; // what each model file holds, by role
};

void TestModelDiscovery::init()
{
    m_dir.emplace();
    QVERIFY(m_dir->isValid());
    m_home = fs::canonical(m_dir->path().toStdString()) / "home";
    fs::create_directories(m_home);
    for (const char* name : {"HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "OLLAMA_MODELS"}) {
        const char* v = std::getenv(name);
        m_saved_env[name] = v ? std::optional<std::string>(v) : std::nullopt;
        ::unsetenv(name);
    }
    ::setenv("HOME", m_home.c_str(), 1);
}

void TestModelDiscovery::cleanup()
{
    for (const auto& [name, value] : m_saved_env) {
        if (value)
            ::setenv(name.c_str(), value->c_str(), 1);
        else
            ::unsetenv(name.c_str());
    }
    m_saved_env.clear();
    m_dir.reset();
}

void TestModelDiscovery::build_home()
{
    // Tokenscope: a valid model, a corrupt one, and a file that is not a model.
    const fs::path ts = m_home / ".local/share/tokenscope/models";
    m_bytes["llama"] = model_bytes("llama", 15);
    write_bytes(ts / "tiny-llama.gguf", m_bytes["llama"]);
    write_bytes(ts / "broken.gguf", {m_bytes["llama"].begin(), m_bytes["llama"].begin() + 40}); // truncated
    write_text(ts / "notes.txt", "not a model");

    // Hugging Face: two revisions link to the same blob; no general.file_type (Q8_0 dominates).
    const fs::path repo = m_home / ".cache/huggingface/hub/models--acme--tiny-GGUF";
    m_bytes["qwen"] = model_bytes("qwen2", std::nullopt, true);
    write_bytes(repo / "blobs/0123abcd", m_bytes["qwen"]);
    write_text(repo / "blobs/readme0", "# tiny");
    for (const char* rev : {"rev1", "rev2"}) {
        fs::create_directories(repo / "snapshots" / rev);
        fs::create_symlink("../../blobs/0123abcd", repo / "snapshots" / rev / "tiny-Q8_0.gguf");
        fs::create_symlink("../../blobs/readme0", repo / "snapshots" / rev / "README.md");
    }
    write_bytes(m_home / ".cache/huggingface/hub/datasets--acme--data/snapshots/r/x.gguf", m_bytes["qwen"]);

    // LM Studio: publisher/model/file.gguf; the second location links to the first, and a
    // directory links back to its parent (a loop the scan must not follow forever).
    const fs::path lms = m_home / ".lmstudio/models";
    m_bytes["gemma"] = model_bytes("gemma3", 2);
    write_bytes(lms / "lmstudio-community/Tiny-GGUF/tiny-Q4_0.gguf", m_bytes["gemma"]);
    fs::create_symlink("..", lms / "lmstudio-community/Tiny-GGUF/loop");
    fs::create_directories(m_home / ".cache/lm-studio");
    fs::create_directory_symlink(lms, m_home / ".cache/lm-studio/models");

    // Ollama: a named GGUF blob, an unnamed one, and a config blob that is not GGUF.
    const fs::path ollama = m_home / ".ollama/models";
    const std::string named(64, 'a'), unnamed(64, 'c'), config(64, 'b');
    m_bytes["ollama"] = model_bytes("gemma3", 1);
    m_bytes["ollama_unnamed"] = model_bytes("llama", 18);
    write_bytes(ollama / "blobs" / ("sha256-" + named), m_bytes["ollama"]);
    write_bytes(ollama / "blobs" / ("sha256-" + unnamed), m_bytes["ollama_unnamed"]);
    write_text(ollama / "blobs" / ("sha256-" + config), R"({"model_format":"gguf"})");
    const fs::path manifests = ollama / "manifests/registry.ollama.ai";
    write_text(manifests / "library/tinymodel/latest", ollama_manifest("sha256:" + named, "sha256:" + config));
    write_text(manifests / "library/tinymodel/small", ollama_manifest("sha256:" + named, "sha256:" + config));
    write_text(manifests / "someone/other/1b", "{ not json");
}

void TestModelDiscovery::defaultRootsFollowHomeAndXdg()
{
    engine::DiscoveryRoots roots = engine::default_discovery_roots();
    std::vector<std::pair<std::string, fs::path>> got;
    for (const auto& r : roots.directories)
        got.emplace_back(r.source, r.directory);
    QVERIFY(roots.directories.size() >= 6);
    QCOMPARE(got[0], std::make_pair(std::string("Tokenscope"), m_home / ".local/share/tokenscope/models"));
    QCOMPARE(got[1], std::make_pair(std::string("Hugging Face"), m_home / ".cache/huggingface/hub"));
    QCOMPARE(got[2], std::make_pair(std::string("LM Studio"), m_home / ".lmstudio/models"));
    QCOMPARE(got[3], std::make_pair(std::string("LM Studio"), m_home / ".cache/lm-studio/models"));
    QCOMPARE(got[4], std::make_pair(std::string("Ollama"), m_home / ".ollama/models/blobs"));
    QCOMPARE(got[5], std::make_pair(std::string("Ollama"), fs::path("/usr/share/ollama/.ollama/models/blobs")));

    ::setenv("XDG_DATA_HOME", "/xdg/data", 1);
    ::setenv("HF_HOME", "/hf", 1);
    roots = engine::default_discovery_roots();
    QCOMPARE(roots.directories[0].directory, fs::path("/xdg/data/tokenscope/models"));
    QCOMPARE(roots.directories[1].directory, fs::path("/hf/hub"));
    QVERIFY(roots.directories[1].layout == engine::RootLayout::HuggingFace);
}

void TestModelDiscovery::scansEveryLayout()
{
    build_home();
    const fs::path elsewhere = m_home.parent_path() / "elsewhere";
    m_bytes["recent"] = model_bytes("phi3", 7);
    write_bytes(elsewhere / "recent.gguf", m_bytes["recent"]);

    engine::DiscoveryRoots roots = engine::default_discovery_roots();
    roots.recent_files = {elsewhere / "recent.gguf", m_home / ".local/share/tokenscope/models/tiny-llama.gguf",
                          elsewhere / "gone.gguf"};
    std::vector<DiscoveredModel> all = engine::discover_models(roots);

    // Only what lies in the test's tree (a real Ollama install under /usr/share stays out of it).
    std::vector<DiscoveredModel> models;
    for (DiscoveredModel& m : all)
        if (m.path.string().starts_with(m_home.parent_path().string()))
            models.push_back(std::move(m));

    QStringList listed;
    for (const DiscoveredModel& m : models)
        listed << QString::fromStdString(m.source + " | " + m.display_name);
    const QStringList expected = {
        "Tokenscope | broken.gguf",
        "Tokenscope | tiny-llama.gguf",
        "Hugging Face | acme/tiny-GGUF \u00B7 tiny-Q8_0.gguf",
        "LM Studio | lmstudio-community/Tiny-GGUF \u00B7 tiny-Q4_0.gguf",
        "Ollama | sha256-cccccccccccc",
        "Ollama | tinymodel:latest, tinymodel:small",
        "Recent | recent.gguf",
    };
    QCOMPARE(listed, expected); // one entry per file: the second revision, the linked LM Studio
                                // directory, the loop and the recent copy add nothing

    const DiscoveredModel* broken = find(models, "Tokenscope", "broken.gguf");
    QVERIFY(broken->error.has_value());
    QVERIFY2(broken->error->find("broken.gguf") != std::string::npos, broken->error->c_str());
    QVERIFY(broken->architecture.empty());

    const DiscoveredModel* llama = find(models, "Tokenscope", "tiny-llama.gguf");
    QVERIFY(!llama->error);
    QCOMPARE(llama->architecture, std::string("llama"));
    QCOMPARE(llama->file_type, std::string("Q4_K_M"));
    QCOMPARE(llama->file_size, uint64_t(m_bytes["llama"].size()));

    const DiscoveredModel* hf = find(models, "Hugging Face", "acme/tiny-GGUF \xC2\xB7 tiny-Q8_0.gguf");
    QVERIFY(!hf->error);
    QCOMPARE(hf->path.filename().string(), std::string("tiny-Q8_0.gguf")); // the snapshot link, not the blob
    QCOMPARE(hf->architecture, std::string("qwen2"));
    QCOMPARE(hf->file_type, std::string("Q8_0")); // no general.file_type: the dominant tensor type
    QCOMPARE(hf->file_size, uint64_t(m_bytes["qwen"].size()));

    const DiscoveredModel* lms = find(models, "LM Studio", "lmstudio-community/Tiny-GGUF \xC2\xB7 tiny-Q4_0.gguf");
    QCOMPARE(lms->architecture, std::string("gemma3"));
    QCOMPARE(lms->file_type, std::string("Q4_0"));

    const DiscoveredModel* ollama = find(models, "Ollama", "tinymodel:latest, tinymodel:small");
    QVERIFY(!ollama->error);
    QCOMPARE(ollama->path.filename().string(), "sha256-" + std::string(64, 'a'));
    QCOMPARE(ollama->file_type, std::string("F16"));
    QCOMPARE(ollama->file_size, uint64_t(m_bytes["ollama"].size()));
    QCOMPARE(find(models, "Ollama", "sha256-cccccccccccc")->file_type, std::string("Q6_K"));

    const DiscoveredModel* recent = find(models, "Recent", "recent.gguf");
    QCOMPARE(recent->architecture, std::string("phi3"));
    QCOMPARE(recent->file_type, std::string("Q8_0"));
}

void TestModelDiscovery::missingRootsAreFine()
{
    engine::DiscoveryRoots roots;
    const fs::path nowhere = m_home / "nowhere";
    roots.directories = {{nowhere / "a", engine::kSourceTokenscope, engine::RootLayout::Plain},
                         {nowhere / "b", engine::kSourceHuggingFace, engine::RootLayout::HuggingFace},
                         {nowhere / "c", engine::kSourceLmStudio, engine::RootLayout::LmStudio},
                         {nowhere / "d", engine::kSourceOllama, engine::RootLayout::OllamaBlobs}};
    roots.recent_files = {nowhere / "x.gguf"};
    QVERIFY(engine::discover_models(roots).empty());

    // A root that is a file, not a directory, is skipped too.
    write_text(m_home / "plain-file", "x");
    roots.directories = {{m_home / "plain-file", engine::kSourceTokenscope, engine::RootLayout::Plain}};
    QVERIFY(engine::discover_models(roots).empty());
}

void TestModelDiscovery::fileTypeNames()
{
    QCOMPARE(*engine::file_type_name(0), std::string_view("F32"));
    QCOMPARE(*engine::file_type_name(15), std::string_view("Q4_K_M"));
    QCOMPARE(*engine::file_type_name(32), std::string_view("BF16"));
    QVERIFY(!engine::file_type_name(4));    // retired
    QVERIFY(!engine::file_type_name(1024)); // "guessed"
}

// Each rule of engine::model_kind_verdict, in order, on a file written with the metadata it reads:
// the kind, and the reason naming the field and value (or the template) that decided. The library
// scan reports the same verdict for the same file.
void TestModelDiscovery::modelKindRules_data()
{
    using S = OptionalText;
    const S none;
    const std::string chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                               "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    QTest::addColumn<S>("finetune");
    QTest::addColumn<S>("name");
    QTest::addColumn<S>("basename");
    QTest::addColumn<S>("chat_template");
    QTest::addColumn<bool>("instruct");
    QTest::addColumn<QString>("reason");

    // 1. A name with an instruct word decides first, template or not, "base" or not.
    QTest::newRow("finetune Instruct-AWQ")
        << S("Instruct-AWQ") << S("Qwen2.5 Coder 0.5B Instruct AWQ") << S("Qwen2.5-Coder") << S(chatml) << true
        << R"(general.finetune says "Instruct-AWQ")";
    QTest::newRow("name says chat, no template")
        << none << S("Tiny Chat v2") << none << none << true << R"(general.name says "Tiny Chat v2")";
    QTest::newRow("basename with it") << none << none << S("gemma-3-it") << none << true
                                      << R"(general.basename says "gemma-3-it")";
    QTest::newRow("instruct word before base word")
        << S("base-sft") << none << none << S(chatml) << true << R"(general.finetune says "base-sft")";
    QTest::newRow("'it' only as a word") << none << S("Pitch Unit 1B") << none << none << false
                                         << "no chat template, and its name does not say instruct";
    // 2. Then "base" in general.finetune or general.name: Qwen2.5 base GGUFs carry a template too.
    QTest::newRow("template, finetune Base")
        << S("Base") << S("Qwen2.5 0.5B") << none << S(chatml) << false << R"(general.finetune says "Base")";
    QTest::newRow("template, name says base")
        << none << S("Llama 3.2 1B base") << none << S(chatml) << false << R"(general.name says "Llama 3.2 1B base")";
    QTest::newRow("basename 'base' is the family, not the tuning")
        << none << none << S("tiny-base") << S(chatml) << true << "it has a chat template";
    // 3. Then a chat template.
    QTest::newRow("template, no names") << none << none << none << S(chatml) << true << "it has a chat template";
    QTest::newRow("Qwen2.5 0.5B, template, no finetune")
        << none << S("Qwen2.5 0.5B") << none << S(chatml) << true << "it has a chat template";
    // 4. Else base.
    QTest::newRow("no template, no names")
        << none << none << none << none << false << "no chat template, and its name does not say instruct";
    QTest::newRow("Gemma 3 270m") << none << S("Gemma 3 270m") << S("gemma-3") << none << false
                                  << "no chat template, and its name does not say instruct";
    QTest::newRow("empty template") << none << S("Tiny") << none << S("") << false
                                    << "no chat template, and its name does not say instruct";
}

void TestModelDiscovery::modelKindRules()
{
    using S = OptionalText;
    QFETCH(S, finetune);
    QFETCH(S, name);
    QFETCH(S, basename);
    QFETCH(S, chat_template);
    QFETCH(bool, instruct);
    QFETCH(QString, reason);

    const fs::path file = m_home / ".local/share/tokenscope/models/model.gguf";
    write_bytes(file, named_model_bytes(finetune, name, basename, chat_template));
    const engine::ModelKindVerdict v = engine::model_kind_verdict(*engine::gguf::GgufFile::open(file));
    QCOMPARE(v.kind == engine::ModelKind::Instruct, instruct);
    QCOMPARE(QString::fromStdString(v.reason), reason);
    QCOMPARE(engine::model_kind(*engine::gguf::GgufFile::open(file)), v.kind);

    const std::vector<DiscoveredModel> found = engine::discover_models(engine::default_discovery_roots());
    const DiscoveredModel* m = find(found, engine::kSourceTokenscope, "model.gguf");
    QVERIFY(m);
    QVERIFY(!m->error);
    QCOMPARE(m->instruct, instruct);
    QCOMPARE(QString::fromStdString(m->kind_reason), reason);
}

QTEST_GUILESS_MAIN(TestModelDiscovery)
#include "test_model_discovery.moc"
