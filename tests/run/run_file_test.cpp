// A run's configuration as text: every setting read from and written back to its canonical text,
// run files read (keys at the top or in tables, every mistake named by file, line and key) and
// written (a run file repeats the configuration), and the field names the library's messages use.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/idx_files.h"
#include "tandem/run.h"

namespace tandem::run {
namespace {

class RunFile : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = scratch_.file(name);
    std::ofstream(path) << text;
    return path;
  }

  testing::ScratchDir scratch_;
  const std::filesystem::path& folder_ = scratch_.path();
};

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST_F(RunFile, KeysAtTheTopOrInTablesSetTheFields) {
  const RunConfig config = load_run_file(write("run.toml",
                                               "model = \"mlp\"\n"
                                               "epochs = 3\n"
                                               "deterministic = true\n"
                                               "validation-split = 0.25\n"
                                               "[optimizer]\n"
                                               "lr = 2e-3\n"
                                               "lr-schedule = \"constant\"\n"
                                               "[input]\n"
                                               "batch-size = 64\n"
                                               "augment = \"flip,translate\"\n"
                                               "image-size = \"32x48\"\n"
                                               "memory-limit = \"1G\"\n"));
  EXPECT_EQ(config.model, "mlp");
  EXPECT_EQ(config.epochs, 3);
  EXPECT_TRUE(config.deterministic);
  EXPECT_EQ(config.data.validation_split, 0.25);
  EXPECT_EQ(config.optimizer.learning_rate, 0.002);
  EXPECT_EQ(config.optimizer.schedule, "constant");
  EXPECT_EQ(config.batch_size, 64);
  EXPECT_EQ(config.data.augment, (std::vector<std::string>{"flip", "translate"}));
  EXPECT_EQ(config.data.images.image_height, 32);
  EXPECT_EQ(config.data.images.image_width, 48);
  EXPECT_EQ(config.precision.memory_limit, std::size_t{1} << 30);
  // A flag set to false is left off; what the file does not name keeps its default.
  const RunConfig off = load_run_file(write("off.toml", "deterministic = false\n"));
  EXPECT_FALSE(off.deterministic);
  EXPECT_EQ(off.batch_size, RunConfig{}.batch_size);
}

TEST_F(RunFile, EveryMistakeNamesTheFileTheLineAndTheKey) {
  struct Case {
    std::string text;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases{
      {"epochs = 2\nbatch-sise = 64\n",
       {"bad.toml:2: unknown key 'batch-sise' (did you mean 'batch-size'?)",
        "the keys are RunConfig's settings"}},
      {"[optimizer]\nlearning-rate = 0.1\n", {"bad.toml:2: unknown key 'optimizer.learning-rate'"}},
      {"batch-size = \"many\"\n",
       {"bad.toml:1: key 'batch-size': batch_size must be a positive integer, got 'many'",
        "correct the value in the file"}},
      {"batch-size = -3\n", {"bad.toml:1: key 'batch-size'", "-3"}},
      {"epochs = true\n", {"bad.toml:1: key 'epochs' needs a value (epochs N)"}},
      {"model = [\"mlp\"]\n", {"bad.toml:1: key 'model' needs a value"}},
      {"deterministic = \"yes\"\n",
       {"bad.toml:1: key 'deterministic' is a flag", "deterministic = true"}},
      {"epochs = 2\n[more]\nepochs = 3\n",
       {"bad.toml:3: key 'epochs' is given twice (also on line 1", "keep one"}},
      {"config = \"other.toml\"\n", {"bad.toml:1: key 'config' names another run file"}},
      {"[a.b]\nepochs = 1\n", {"bad.toml", "is nested", "one level deep"}},
      {"epochs = = 2\n", {"bad.toml:1: bad TOML", "https://toml.io"}},
      {"lr = 0.1\n[optimizer]\nlr-schedule = \"linear\"\n",
       {"bad.toml:3: key 'optimizer.lr-schedule': unknown schedule 'linear' for "
        "optimizer.schedule; choose constant or cosine"}},
  };
  for (const Case& c : cases) {
    const std::string path = write("bad.toml", c.text);
    const std::string message = error_of([&] { load_run_file(path); });
    for (const std::string& part : c.expected)
      EXPECT_NE(message.find(part), std::string::npos) << c.text << " -> " << message;
  }
  const std::string missing = error_of([&] { load_run_file((folder_ / "none.toml").string()); });
  EXPECT_NE(missing.find("none.toml: no such file"), std::string::npos) << missing;
  const std::string folder = error_of([&] { load_run_file(folder_.string()); });
  EXPECT_NE(folder.find("not a regular file"), std::string::npos) << folder;
}

// TOML nested deeper than a run file needs is refused before the parser sees it: a 40,000-part
// dotted key, or arrays nested 40,000 deep, overflowed the stack of toml++'s recursive parser and
// killed the process.
TEST_F(RunFile, DeepNestingIsBadTomlNotACrash) {
  std::string dotted = "epochs = 2\n";
  for (int part = 0; part < 40000; ++part)
    dotted += (part == 0 ? "a" : ".a");
  dotted += " = 1\n";
  const std::string keys = error_of([&] { load_run_file(write("dotted.toml", dotted)); });
  EXPECT_NE(keys.find("dotted.toml:2: bad TOML (nested 33 levels deep, more than 32)"),
            std::string::npos)
      << keys;
  const std::string arrays = error_of([&] {
    load_run_file(write("arrays.toml",
                        "lr = " + std::string(40000, '[') + "1" + std::string(40000, ']') + "\n"));
  });
  EXPECT_NE(arrays.find("arrays.toml:1: bad TOML (nested 33 levels deep"), std::string::npos)
      << arrays;
  // Dots in values, strings and comments are no nesting; a few levels are fine.
  EXPECT_EQ(load_run_file(
                write("fine.toml",
                      "# a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g\n"
                      "[optimizer]\nlr = 0.5\n"
                      "logdir = \"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d\"\n"))
                .optimizer.learning_rate,
            0.5);
}

// A caller's own keys (the CLI's report) are read with its check; messages name settings as the
// caller spells them.
TEST_F(RunFile, ACallerAddsItsOwnKeysAndNames) {
  const RunFileKeys keys{{{"report", false}},
                         [](const std::string& key, const std::string& text) {
                           if (!text.ends_with(".json")) throw ConfigError(key + " is no .json");
                         },
                         "the caller's keys"};
  const auto option = [](const std::string& key) { return "--" + key; };
  const std::vector<FileSetting> settings = read_run_file(
      write("run.toml", "report = \"r.json\"\n[optimizer]\nlr = 0.5\n"), keys, option);
  ASSERT_EQ(settings.size(), 2u);
  const auto find = [&](const std::string& key) {
    return *std::find_if(settings.begin(), settings.end(),
                         [&](const FileSetting& setting) { return setting.key == key; });
  };
  EXPECT_EQ(find("report").text, "r.json");
  EXPECT_EQ(find("report").line, 1);
  EXPECT_EQ(find("lr").text, "0.5");
  EXPECT_EQ(find("lr").line, 3);
  EXPECT_EQ(find("lr").written, "optimizer.lr");
  const std::string bad_report =
      error_of([&] { read_run_file(write("bad.toml", "report = \"r.txt\"\n"), keys, option); });
  EXPECT_NE(bad_report.find("bad.toml:1: key 'report': report is no .json"), std::string::npos)
      << bad_report;
  const std::string bad_lr =
      error_of([&] { read_run_file(write("bad.toml", "lr = \"fast\"\n"), keys, option); });
  EXPECT_NE(bad_lr.find("key 'lr': --lr must be a positive number"), std::string::npos) << bad_lr;
  const std::string unknown =
      error_of([&] { read_run_file(write("bad.toml", "reprot = 1\n"), keys, option); });
  EXPECT_NE(unknown.find("(did you mean 'report'?); the keys are the caller's keys"),
            std::string::npos)
      << unknown;
}

// Every setting's canonical text reads back into the same field: a configuration survives a
// run file, a report and a checkpoint's record.
TEST(Settings, EveryTextReadsBackToTheSameField) {
  RunConfig changed;
  const std::vector<std::pair<std::string, std::string>> texts{
      {"model", "mlp"},
      {"epochs", "7"},
      {"batch-size", "48"},
      {"lr", "0.0025"},
      {"lr-schedule", "constant"},
      {"threads", "3"},
      {"seed", "18446744073709551615"},
      {"validation-split", "0.2"},
      {"data-fraction", "0.5"},
      {"jit", "off"},
      {"verbose", "true"},
      {"logdir", "logs"},
      {"log-every", "5"},
      {"histogram-freq", "0"},
      {"monitor-interval", "0.5"},
      {"profile", "true"},
      {"profile-steps", "3:7"},
      {"log-device-placement", "true"},
      {"checkpoint-dir", "ckpt"},
      {"checkpoint-every", "100"},
      {"keep-checkpoints", "0"},
      {"keep-best", "val_loss"},
      {"deterministic", "true"},
      {"save-model", "model"},
      {"strategy", "xla-cpu"},
      {"replicas", "2"},
      {"pjrt-plugin", "plugin.so"},
      {"lr-scaling", "linear"},
      {"join-timeout", "30"},
      {"collective-timeout", "45.5"},
      {"bucket-kib", "128"},
      {"precision", "bf16"},
      {"memory-limit", "536870912"},
      {"find-max-batch", "true"},
      {"keep-denormals", "true"},
      {"image-feature", "image/encoded"},
      {"label-feature", "image/class/label"},
      {"image-size", "32x48"},
      {"channels", "3"},
      {"augment", "flip,resized-crop"},
      {"num-classes", "12"},
      {"prune", "0.75"},
      {"prune-schedule", "constant"},
      {"prune-pattern", "unstructured"},
      {"prune-layers", "dense,conv2d"},
      {"quantize", "int8"},
      {"calibrator", "entropy"},
      {"calibration-examples", "256"},
      {"qat-epochs", "2"},
      {"quantize-layers", "dense"},
  };
  for (const auto& [key, text] : texts) {
    ASSERT_NE(find_setting(key), nullptr) << key;
    set_setting(changed, key, text);
    EXPECT_EQ(setting_text(changed, key), text) << key;
  }
  EXPECT_EQ(changed.optimizer.learning_rate, 0.0025);
  EXPECT_EQ(changed.strategy.strategy.multi_worker.bucket_bytes, 128u * 1024);
  EXPECT_EQ(changed.logging.profile_first, 3);
  EXPECT_EQ(changed.logging.profile_last, 7);
  EXPECT_EQ(changed.jit, std::optional<bool>(false));
  EXPECT_EQ(changed.verbosity, 2);
  // The defaults have no changed setting; each of these is one.
  EXPECT_TRUE(changed_settings(RunConfig{}).empty());
  const auto settings = changed_settings(changed);
  for (const auto& [key, text] : texts) {
    const bool listed = std::any_of(settings.begin(), settings.end(),
                                    [&](const auto& item) { return item.first == key; });
    // prune-pattern "unstructured" is the default.
    EXPECT_EQ(listed, key != "prune-pattern") << key;
  }
}

// The defaults' texts read back too: a checkpoint records settings at their defaults.
TEST(Settings, TheDefaultsTextsReadBack) {
  const RunConfig defaults;
  for (const Setting& setting : settings()) {
    const std::string text = setting_text(defaults, setting.key);
    if (text.empty() || setting.key == "data-dir") continue;  // unset; a folder that may be absent
    RunConfig config;
    EXPECT_NO_THROW(set_setting(config, setting.key, text)) << setting.key << " = " << text;
    EXPECT_EQ(setting_text(config, setting.key), text) << setting.key;
  }
}

// A configuration written as a run file and read back is the same configuration.
TEST_F(RunFile, ARunFileRepeatsTheConfiguration) {
  RunConfig config;
  config.model = "mlp";
  config.optimizer.learning_rate = 3e-4;
  config.deterministic = true;
  config.data.augment = {"flip"};
  config.data.images.training = folder_.string();
  config.data.images.image_height = 16;
  config.data.images.image_width = 16;
  config.precision.memory_limit = 123456789;
  config.logging.profile_first = 2;
  config.logging.profile_last = 4;
  config.checkpoints.resume = "somewhere";  // a run file repeats a run, not its resumption
  const std::string text = run_file_text(config);
  EXPECT_EQ(text.find("resume"), std::string::npos) << text;
  EXPECT_NE(text.find("\nlr = 3e-04\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ndeterministic = true\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nimage-size = \"16x16\"\n"), std::string::npos) << text;
  const RunConfig read = load_run_file(write("run.toml", text));
  config.checkpoints.resume.clear();
  EXPECT_EQ(changed_settings(read), changed_settings(config));
}

TEST(Settings, MistakesNameTheFieldOrTheCallersName) {
  RunConfig config;
  EXPECT_EQ(error_of([&] { set_setting(config, "batch-size", "0"); }),
            "batch_size must be a positive integer, got '0'");
  EXPECT_EQ(error_of([&] { set_setting(config, "lr", "x"); }),
            "optimizer.learning_rate must be a positive number, got 'x'");
  EXPECT_EQ(error_of([&] {
              set_setting(config, "lr", "x", [](const std::string& key) { return "--" + key; });
            }),
            "--lr must be a positive number, got 'x'");
  EXPECT_NE(error_of([&] {
              set_setting(config, "batch-sise", "1");
            }).find("unknown setting 'batch-sise' (did you mean 'batch-size'?)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set_setting(config, "data", "/nonexistent/data.tfrecord"); })
                .find("data.images.training /nonexistent/data.tfrecord: "
                      "/nonexistent/data.tfrecord does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              set_setting(config, "model", "nonet");
            }).find("unknown model 'nonet' for model; choose "),
            std::string::npos);
}

TEST(Settings, TheRulesAcrossFieldsNameEveryFieldInvolved) {
  const auto problem = [](const std::function<void(RunConfig&)>& change) {
    RunConfig config;
    change(config);
    return error_of([&] { validate(config); });
  };
  EXPECT_EQ(problem([](RunConfig& c) { c.checkpoints.keep = 5; }),
            "checkpoints.every_steps, checkpoints.keep and checkpoints.keep_best need "
            "checkpoints.directory DIR");
  EXPECT_NE(
      problem([](RunConfig& c) {
        c.data.images.validation = "val";
        c.data.validation_split = 0.1;
      }).find("data.images.validation and data.validation_split both say what to validate on"),
      std::string::npos);
  EXPECT_NE(problem([](RunConfig& c) {
              c.logging.log_every = 5;
            }).find("logging.log_every only matters with logging.logdir DIR"),
            std::string::npos);
  EXPECT_NE(problem([](RunConfig& c) {
              c.quantization.qat_epochs = 1;
            }).find("shape the quantisation that quantization.precision int8 asks for"),
            std::string::npos);
  EXPECT_NE(problem([](RunConfig& c) {
              c.pruning.layers = {"dense"};
            }).find("shape the pruning that pruning.sparsity S asks for"),
            std::string::npos);
  EXPECT_EQ(problem([](RunConfig&) {}), "(no error)");
  // What the rules imply: 2:4 pruning is half the weights; a resumed run checkpoints where it
  // came from.
  RunConfig config;
  config.pruning.pattern = "2:4";
  config.checkpoints.resume = "runs/a/ckpt-000120";
  validate(config);
  EXPECT_EQ(config.pruning.sparsity, 0.5);
  EXPECT_EQ(config.checkpoints.directory, "runs/a");
}

}  // namespace
}  // namespace tandem::run
