// `qtft tune` as a user runs it: the learning-rate range test first, a short search in the
// same folder, and `qtft report --tune` drawing both; the refusals of bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "qtft/data/bars/bars.h"
#include "support/bar_files.h"
#include "support/browser.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft::test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class TuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    csv_ = dir_.file("bars.csv");
    data::write_bars_csv(regular_bar_set(300, 2), csv_);
    std::ofstream(dir_.file("space.json")) << R"({"hidden_size": [8, 16], "dropout": {"min": 0, "max": 0.2}})";
  }
  std::string tune(const std::string& more, const std::string& epochs = "2") const {
    return "tune --csv-file '" + csv_ +
           "' --encoder-length 12 --horizon 3 --hidden-size 8 --attention-heads 2 --epochs " + epochs +
           " --batch-size 32 " + more;
  }
  TempDir dir_;
  std::string csv_;
};

TEST_F(TuneCli, FindsALearningRateThenSearchesAndTheReportDrawsBoth) {
  const std::string out = dir_.file("search");
  auto run = run_qtft(dir_, tune("--find-lr --find-lr-steps 40 --find-lr-min 1e-5 --find-lr-max 10 --output " + out),
                      kHangGuard);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("Learning-rate range test: 40 steps from 1e-05 to 10"));
  const auto curve = nlohmann::json::parse(read_text(out + "/lr_find.json"));
  const auto& points = curve.at("points");
  ASSERT_FALSE(points.empty());
  EXPECT_LE(points.size(), 40u);
  EXPECT_EQ(points.at(0).at("learning_rate"), 1e-5);
  // A rate of 10 is far past any use for Adam: the loss runs away, and the suggestion lies
  // below where it did.
  EXPECT_TRUE(curve.at("diverged").get<bool>());
  ASSERT_TRUE(curve.at("suggested_learning_rate").is_number()) << curve.dump();
  const double suggested = curve.at("suggested_learning_rate").get<double>();
  EXPECT_LT(suggested, points.back().at("learning_rate").get<double>());
  EXPECT_THAT(run.out, HasSubstr("Suggested learning rate: "));
  EXPECT_THAT(read_text(out + "/lr_find.html"), HasSubstr("aria-label=\"Learning-rate range test\""));
  EXPECT_FALSE(fs::exists(out + "/journal.json"));  // the range test is no search

  run = run_qtft(dir_, tune("--tune-file " + dir_.file("space.json") + " --trials 2 --eta 2 --output " + out),
                 kHangGuard);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("Best: trial "));
  const std::string html = dir_.file("tune.html");
  run = run_qtft(dir_, "report --tune " + out + " --output " + html, kHangGuard);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto page = read_text(html);
  EXPECT_THAT(page, HasSubstr("The trials rung after rung"));
  EXPECT_THAT(page, HasSubstr("aria-label=\"Learning-rate range test\""));
  EXPECT_THAT(page, HasSubstr("<tr style=\"font-weight:bold\"><td>"));  // the winner's row
  expect_renders_in_a_browser(html, "tune_report.png");
}

// The runs of a journal as (rung, trial) -> validation loss.
std::map<std::pair<int64_t, int64_t>, double> losses_in(const std::string& journal) {
  std::map<std::pair<int64_t, int64_t>, double> out;
  const auto document = nlohmann::json::parse(read_text(journal));
  for (const auto& run : document.at("runs")) {
    out[{run.at("rung").get<int64_t>(), run.at("trial").get<int64_t>()}] = run.at("val_loss").get<double>();
  }
  return out;
}

TEST_F(TuneCli, TrialsSideBySideEndAsTheSearchOfOneProcess) {
  const std::string space = " --tune-file " + dir_.file("space.json") + " --trials 4 --eta 2 --output ";
  auto alone = run_qtft(dir_, tune(space + dir_.file("alone")), kHangGuard);
  ASSERT_EQ(alone.exit_code, 0) << alone.out << alone.err;
  auto side = run_qtft(dir_, tune(space + dir_.file("side") + " --nproc 2"), kHangGuard);
  ASSERT_EQ(side.exit_code, 0) << side.out << side.err;
  EXPECT_THAT(side.out, HasSubstr("[worker 1] trial "));
  // The same trials promoted, to the same losses (each worker on one thread, as alone here):
  // the journal holds every run, the workers' own journals are gone.
  const auto expected = losses_in(dir_.file("alone") + "/journal.json");
  EXPECT_EQ(expected.size(), 4u + 2u + 1u);
  EXPECT_EQ(losses_in(dir_.file("side") + "/journal.json"), expected);
  EXPECT_FALSE(fs::exists(dir_.file("side") + "/journal-worker-1.json"));
  const auto best = alone.out.substr(alone.out.find("Best: trial "));
  EXPECT_THAT(side.out, HasSubstr(best.substr(0, best.find(','))));
  EXPECT_TRUE(fs::exists(dir_.file("side") + "/best.safetensors"));

  // Side by side under a time budget spent by a worker's first trial: each worker stops
  // after the trial it was training, and the first reads the end once both have.
  const std::string timed = dir_.file("timed");
  auto cut = run_qtft(dir_, tune(space + timed + " --nproc 2 --time-budget 1e-9"), kHangGuard);
  ASSERT_EQ(cut.exit_code, 0) << cut.out << cut.err;
  EXPECT_THAT(cut.out, HasSubstr("The time budget (0 s) ended the search at rung 0"));
  const auto ran = losses_in(timed + "/journal.json");
  ASSERT_FALSE(ran.empty());
  EXPECT_LE(ran.size(), 2u);  // a worker starting late may find the budget spent
  for (const auto& [key, loss] : ran) {
    EXPECT_EQ(key.first, 0);
    EXPECT_EQ(loss, expected.at(key));
  }
  EXPECT_FALSE(fs::exists(timed + "/journal-worker-1.json"));
  EXPECT_TRUE(fs::exists(timed + "/best.safetensors"));
  // Without a budget the same search goes on to the end of the one never cut.
  auto rest = run_qtft(dir_, tune(space + timed + " --nproc 2"), kHangGuard);
  ASSERT_EQ(rest.exit_code, 0) << rest.out << rest.err;
  EXPECT_EQ(losses_in(timed + "/journal.json"), expected);
}

TEST_F(TuneCli, ASearchSideBySideStoppedByCtrlCGoesOnToTheSameEnd) {
  // A budget of 16 epochs: the search takes several seconds, most of them in its last rungs.
  const std::string space = " --tune-file " + dir_.file("space.json") + " --trials 4 --eta 2 --output ";
  ASSERT_EQ(run_qtft(dir_, tune(space + dir_.file("alone"), "16"), kHangGuard).exit_code, 0);
  // A SIGTERM to the launcher once a worker has recorded a trial (SIGINT, a terminal's Ctrl-C,
  // reaches a background job of a script as ignored): the launcher passes it on as a Ctrl-C,
  // and the workers stop where they stand, a trial part-trained included.
  const std::string out = dir_.file("side.out"), err = dir_.file("side.err");
  const std::string script = "'" + std::string(QTFT_CLI_PATH) + "' " +
                             on_the_cpu(tune(space + dir_.file("side") + " --nproc 2", "16")) + " >'" + out + "' 2>'" +
                             err + "' & pid=$!; n=0; until grep -q ' rung 0 ' '" + out +
                             "' || [ $n -ge 3000 ]; do sleep 0.1; n=$((n+1)); done; kill -TERM $pid; wait $pid";
  std::ofstream(dir_.file("stop.sh")) << script << "\n";
  const int status = std::system(("sh '" + dir_.file("stop.sh") + "'").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << read_text(out) << read_text(err);
  EXPECT_THAT(read_text(err), HasSubstr("run the same command again to go on"));
  EXPECT_FALSE(fs::exists(dir_.file("side") + "/best.safetensors"));
  // Run again, alone this time: it takes in the workers' journals and ends as the search
  // that never stopped.
  auto resumed = run_qtft(dir_, tune(space + dir_.file("side"), "16"), kHangGuard);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_THAT(resumed.out, HasSubstr("Resuming: "));
  EXPECT_EQ(losses_in(dir_.file("side") + "/journal.json"), losses_in(dir_.file("alone") + "/journal.json"));
  EXPECT_FALSE(fs::exists(dir_.file("side") + "/journal-worker-0.json"));
}

TEST_F(TuneCli, RefusesBadInputInOneLine) {
  auto run = run_qtft(dir_, tune("--output " + dir_.file("s")));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("tune: --tune-file is required (or --find-lr for the range test)"));
  run = run_qtft(dir_, tune("--find-lr --find-lr-min 0 --output " + dir_.file("s")));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--find-lr-min 0: must be a positive rate"));
  run = run_qtft(dir_, "report --tune " + dir_.file("nowhere") + " --output " + dir_.file("r.html"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr(dir_.file("nowhere") + ": not a search's folder (no journal.json)"));
  EXPECT_FALSE(fs::exists(dir_.file("r.html")));
}

}  // namespace
}  // namespace qtft::test
