// `qtft train --nproc N`: N worker processes training as one data-parallel group, as under
// torchrun. The workers match one process taking their batches as one; Ctrl-C stops every
// worker after the same step and leaves one checkpoint that --resume continues exactly; a
// killed worker ends the others with a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "qtft/artifact/model_file.h"
#include "qtft/dist/local_workers.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

extern char** environ;

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const std::string kModel = " --hidden-size 8 --attention-heads 2 --encoder-length 16 --horizon 4";

class DistributedCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.file("bars.parquet");
    ASSERT_EQ(run_qtft(dir_, "make-data --output " + data_ + " --rows 2400 --symbols 2").exit_code, 0);
  }
  std::string train_args(const std::string& extra) const { return "train --parquet-file " + data_ + kModel + extra; }
  test::TempDir dir_;
  std::string data_;
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(DistributedCli, TwoWorkersOfBatchBTrainAsOneProcessOfBatch2B) {
  const std::string common = " --epochs 1 --max-batches-per-epoch 4 --dropout 0 --seed 3";
  auto two = run_qtft(dir_, train_args(common + " --nproc 2 --batch-size 8 --save-model " +
                                       dir_.file("two.safetensors") + " --metrics-json " + dir_.file("two.json")));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto one = run_qtft(dir_, train_args(common + " --batch-size 16 --save-model " + dir_.file("one.safetensors")));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(two.out, HasSubstr("Data parallel: 2 ranks (Gloo), 1 thread each; every step takes 8 windows per rank, "
                                 "16 in all; live QAT observers update once per step (one collective)"));
  // Rank 0 alone prints.
  EXPECT_EQ(count(two.out, "Summary: "), 1u) << two.out;
  EXPECT_EQ(count(two.out, "Saved "), 1u) << two.out;
  const auto a = artifact::load_model_file(dir_.file("one.safetensors"));
  const auto b = artifact::load_model_file(dir_.file("two.safetensors"));
  ASSERT_EQ(a.weights.size(), b.weights.size());
  // Four Adam steps; the float sums run in another order (DataParallel's library test
  // explains the bound).
  for (size_t i = 0; i < a.weights.size(); ++i) {
    EXPECT_EQ(a.weights[i].first, b.weights[i].first);
    EXPECT_LE((a.weights[i].second - b.weights[i].second).abs().max().item<double>(), 1e-5) << a.weights[i].first;
  }
  // The validation the ranks shared out is exactly what one process measures on the model.
  auto evaluated = run_qtft(dir_, "evaluate --load-model " + dir_.file("two.safetensors") + " --parquet-file " + data_ +
                                      " --split validation --metrics-json " + dir_.file("eval.json"));
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  EXPECT_EQ(nlohmann::json::parse(test::read_text(dir_.file("eval.json")))["val_loss"].get<double>(),
            nlohmann::json::parse(test::read_text(dir_.file("two.json")))["val_loss"].get<double>());
}

TEST_F(DistributedCli, TwoWorkersCalibrateAsOneProcessOfTheGlobalBatch) {
  // The default QAT route: live observers, calibrated first, updated once a step (the ranks'
  // default; one process takes it by flag). Each rank calibrates on its half of every global
  // batch (before, each calibrated on batches of its own size, half the windows one process
  // of the global batch sees), and each batch's one collective merges the halves' extremes.
  const std::string common =
      " --epochs 1 --max-batches-per-epoch 2 --dropout 0 --seed 3 --use-qat --qat-calibration-batches 4 "
      "--observer-update step";
  auto two =
      run_qtft(dir_, train_args(common + " --nproc 2 --batch-size 8 --save-model " + dir_.file("two.safetensors")));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto one = run_qtft(dir_, train_args(common + " --batch-size 16 --save-model " + dir_.file("one.safetensors")));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto a = artifact::load_model_file(dir_.file("one.safetensors"));
  const auto b = artifact::load_model_file(dir_.file("two.safetensors"));
  ASSERT_EQ(a.weights.size(), b.weights.size());
  int zero_points = 0;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const auto& [name, value] = a.weights[i];
    ASSERT_EQ(name, b.weights[i].first);
    const double difference = (value.to(at::kDouble) - b.weights[i].second.to(at::kDouble)).abs().max().item<double>();
    if (name.ends_with("zero_point")) {
      ++zero_points;
      EXPECT_LE(difference, 1.0) << name;  // at most one step of rounding, where it was up to 33
    } else {
      EXPECT_LE(difference, 1e-5) << name;
    }
  }
  EXPECT_GT(zero_points, 0) << "the files hold the observers";
}

TEST_F(DistributedCli, UnderTorchrunTheRanksTrainAsNprocTrains) {
  // torchrun hosts the rendezvous store itself (TORCHELASTIC_USE_AGENT_STORE), so rank 0
  // joins it as a client; the result is bitwise that of qtft's own launcher.
  ASSERT_TRUE(std::filesystem::exists(QTFT_TEST_PYTHON)) << "run scripts/setup.sh to create the venv";
  const std::string common = " --epochs 1 --max-batches-per-epoch 3 --batch-size 8";
  auto torchrun =
      run_qtft(dir_, train_args(common + " --save-model " + dir_.file("torchrun.safetensors")),
               "'" + std::string(QTFT_TEST_PYTHON) + "' -m torch.distributed.run --nproc-per-node 2 --no-python");
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.out << torchrun.err;
  EXPECT_THAT(torchrun.out, HasSubstr("Data parallel: 2 ranks"));
  EXPECT_EQ(count(torchrun.out, "Summary: "), 1u) << torchrun.out;
  auto nproc = run_qtft(dir_, train_args(common + " --nproc 2 --save-model " + dir_.file("nproc.safetensors")));
  ASSERT_EQ(nproc.exit_code, 0) << nproc.err;
  auto diff = run_qtft(dir_, "diff " + dir_.file("torchrun.safetensors") + " " + dir_.file("nproc.safetensors"));
  EXPECT_EQ(diff.exit_code, 0) << diff.out;
}

TEST_F(DistributedCli, CtrlCStopsEveryWorkerAndResumeContinuesExactly) {
  // One SIGINT to the launcher, as a terminal's Ctrl-C: it passes it on to both workers,
  // they stop after the same step, rank 0 saves, and all exit 130. QAT with live observers,
  // updated once per step (the data-parallel default): the resumed run goes on exactly.
  const auto checkpoint = dir_.file("ckpt.safetensors");
  const std::string common =
      " --nproc 2 --batch-size 8 --max-batches-per-epoch 2 --patience 0 --use-qat --qat-calibration-batches 2";
  auto stopped = run_qtft(dir_, train_args(common + " --epochs 100000 --save-model " + checkpoint),
                          "timeout --foreground --preserve-status -s INT 10");
  ASSERT_EQ(stopped.exit_code, 130) << stopped.out << stopped.err;
  EXPECT_EQ(count(stopped.err, "saved a resumable checkpoint to " + checkpoint), 1u) << stopped.err;
  EXPECT_THAT(stopped.err, HasSubstr("(on 2 ranks, as this run: add --nproc 2, or launch it with torchrun"));
  // Workers that stopped because they were asked to are not reported as failures.
  EXPECT_THAT(stopped.err, ::testing::Not(HasSubstr("exited with code")));
  const auto saved = artifact::load_model_file(checkpoint);
  ASSERT_TRUE(saved.training.has_value());
  const int64_t epochs = saved.training->epochs_completed + 1;

  auto resumed = run_qtft(dir_, "train --nproc 2 --resume --load-model " + checkpoint + " --epochs " +
                                    std::to_string(epochs) + " --save-model " + dir_.file("resumed.safetensors"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, ::testing::Not(HasSubstr("note:")));
  auto straight = run_qtft(dir_, train_args(common + " --epochs " + std::to_string(epochs) + " --save-model " +
                                            dir_.file("straight.safetensors")));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  // Dropout included: every rank draws from the same seeded stream, so rank 0's saved
  // random state is every rank's.
  auto diff = run_qtft(dir_, "diff " + dir_.file("resumed.safetensors") + " " + dir_.file("straight.safetensors"));
  EXPECT_EQ(diff.exit_code, 0) << diff.out;
}

// A qtft command started in the background, its output in files.
struct Background {
  pid_t pid = -1;
  std::string out, err;
  Background(const test::TempDir& dir, const std::string& args) : out(dir.file("bg.out")), err(dir.file("bg.err")) {
    std::string command =
        "exec '" + std::string(QTFT_CLI_PATH) + "' " + test::on_the_cpu(args) + " >'" + out + "' 2>'" + err + "'";
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    EXPECT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  }
  // A test that failed half-way leaves nothing running: two interrupts, which the
  // launcher passes on, end its workers as a user's double Ctrl-C would.
  ~Background() {
    if (pid <= 0 || reaped) return;
    ::kill(pid, SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(pid, SIGINT);
    ::waitpid(pid, nullptr, 0);
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  // The exit status, or nullopt while it runs after `limit`.
  std::optional<int> wait_for(std::chrono::seconds limit) {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }
  // Whether stdout shows `text` within `limit`: a generous bound that only catches a hang.
  bool printed(const std::string& text, std::chrono::seconds limit = std::chrono::seconds(300)) const {
    const auto until = Clock::now() + limit;
    while (test::read_text(out).find(text) == std::string::npos) {
      if (Clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }
  bool reaped = false;
};

// The child of `parent` whose environment says RANK=rank, or -1.
pid_t worker_of(pid_t parent, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state, ppid;
    stat >> pid >> comm >> state >> ppid;
    if (ppid != std::to_string(parent)) continue;
    const std::string env = test::read_text((entry.path() / "environ").string());
    if (env.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos) return std::stoi(name);
  }
  return -1;
}

TEST_F(DistributedCli, AKilledWorkerEndsTheOthersWithAClearErrorAndTheCheckpointSurvives) {
  // A saved run, continued with two workers; one of them is killed mid-training.
  const auto checkpoint = dir_.file("ckpt.safetensors"), before = dir_.file("before.safetensors");
  const std::string common = " --nproc 2 --batch-size 8 --max-batches-per-epoch 2 --patience 0";
  ASSERT_EQ(run_qtft(dir_, train_args(common + " --epochs 1 --save-model " + checkpoint)).exit_code, 0);
  std::filesystem::copy_file(checkpoint, before);
  Background run(dir_, "train --nproc 2 --resume --load-model " + checkpoint + " --epochs 100000 --dist-timeout 20");
  // Training has begun once rank 0 reports a batch of the second epoch.
  ASSERT_TRUE(run.printed("epoch 2/100000 batch 1/2")) << test::read_text(run.out) << test::read_text(run.err);
  const pid_t rank1 = worker_of(run.pid, 1);
  ASSERT_GT(rank1, 0) << test::read_text(run.out) << test::read_text(run.err);
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  const auto killed_at = Clock::now();
  // Rank 0 fails in its next collective: at once when the dead peer's socket closes, at
  // the latest after --dist-timeout. The bound only catches a hang on a loaded machine.
  const auto code = run.wait_for(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value()) << "still running 300 s after a worker was killed";
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  EXPECT_EQ(*code, 128 + SIGKILL);  // the first failure's
  const auto err = test::read_text(run.err);
  EXPECT_THAT(err, HasSubstr("qtft: worker rank 1 (pid " + std::to_string(rank1) + ") was killed by signal 9"));
  // Gloo says "Connection closed by peer" or "Connection reset by peer", as the timing goes.
  EXPECT_THAT(err, ::testing::ContainsRegex("failed on rank 0 of 2: .*by peer"));
  EXPECT_THAT(err, HasSubstr("qtft: worker rank 0"));
  // The checkpoint the run continued from is untouched and still resumes.
  EXPECT_EQ(run_qtft(dir_, "diff " + checkpoint + " " + before).exit_code, 0);
  std::printf("rank 0 ended %.2f s after rank 1 was killed\n", seconds);
}

// Not running: no such process, or a zombie nobody has reaped yet.
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string id, comm, state;
  return !(stat >> id >> comm >> state) || state == "Z";
}

TEST_F(DistributedCli, WorkersWhoseLauncherDiesStopAndSaveACheckpoint) {
  const auto checkpoint = dir_.file("ckpt.safetensors");
  Background run(dir_, train_args(" --nproc 2 --batch-size 8 --max-batches-per-epoch 2 --patience 0 --epochs 100000 "
                                  "--save-model " +
                                  checkpoint));
  ASSERT_TRUE(run.printed("batch 1/2")) << test::read_text(run.out) << test::read_text(run.err);
  const pid_t rank0 = worker_of(run.pid, 0), rank1 = worker_of(run.pid, 1);
  ASSERT_GT(rank0, 0) << test::read_text(run.err);
  ASSERT_GT(rank1, 0) << test::read_text(run.err);
  ASSERT_EQ(::kill(run.pid, SIGKILL), 0);
  EXPECT_EQ(run.wait_for(std::chrono::seconds(300)), 128 + SIGKILL);
  // The workers notice within a second or two; the bound only catches a hang.
  const auto until = Clock::now() + std::chrono::seconds(300);
  while (!(ended(rank0) && ended(rank1)) && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const bool both_ended = ended(rank0) && ended(rank1);
  if (!both_ended) ::kill(rank0, SIGKILL), ::kill(rank1, SIGKILL);
  ASSERT_TRUE(both_ended) << "the workers outlived their launcher by 300 s";
  EXPECT_THAT(test::read_text(run.err), HasSubstr("saved a resumable checkpoint to " + checkpoint));
  const auto saved = artifact::load_model_file(checkpoint);
  ASSERT_TRUE(saved.training.has_value());
  EXPECT_FALSE(saved.training->finished);
}

TEST_F(DistributedCli, TwoTorchrunNodesTrainAsNprocTrains) {
  // Two torchrun agents, as on two machines: node 0 hosts the rendezvous on the master
  // endpoint, node 1 joins it, one worker each; Gloo talks over the interface
  // GLOO_SOCKET_IFNAME names (loopback here, the machines' network in a real run).
  ASSERT_TRUE(std::filesystem::exists(QTFT_TEST_PYTHON)) << "run scripts/setup.sh to create the venv";
  const std::string common =
      " --epochs 1 --max-batches-per-epoch 3 --batch-size 8 --use-qat --qat-calibration-batches 2";
  const auto port = std::to_string(dist::free_loopback_port());
  const auto node = [&](int rank) {
    return "GLOO_SOCKET_IFNAME=lo '" + std::string(QTFT_TEST_PYTHON) +
           "' -m torch.distributed.run --nnodes 2 --node-rank " + std::to_string(rank) +
           " --nproc-per-node 1 --master-addr 127.0.0.1 --master-port " + port + " --no-python '" + QTFT_CLI_PATH +
           "' " + test::on_the_cpu(train_args(common + " --save-model " + dir_.file("nodes.safetensors"))) + " >'" +
           dir_.file("node" + std::to_string(rank) + ".out") + "' 2>&1";
  };
  const std::string script = node(1) + " & " + node(0) + "; zero=$?; wait $!; one=$?; exit $((zero | one))";
  const int status = std::system((test::kHangGuard + " bash -c \"" + script + "\"").c_str());
  const std::string node0 = test::read_text(dir_.file("node0.out")), node1 = test::read_text(dir_.file("node1.out"));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << node0 << "\n---\n" << node1;
  EXPECT_THAT(node0, HasSubstr("Data parallel: 2 ranks (Gloo)"));
  EXPECT_EQ(count(node0, "Summary: "), 1u) << node0;
  EXPECT_EQ(count(node1, "Summary: "), 0u) << node1;
  auto nproc = run_qtft(dir_, train_args(common + " --nproc 2 --save-model " + dir_.file("nproc.safetensors")));
  ASSERT_EQ(nproc.exit_code, 0) << nproc.err;
  auto diff = run_qtft(dir_, "diff " + dir_.file("nodes.safetensors") + " " + dir_.file("nproc.safetensors"));
  EXPECT_EQ(diff.exit_code, 0) << diff.out;
}

TEST_F(DistributedCli, CudaAcrossRanksIsNcclAndIsRefusedClearlyWithoutAGpu) {
  // On a GPU machine a build with NCCL is not refused: the rank goes on to a rendezvous that
  // no peer joins (a build without NCCL is still refused, but for that alone).
  if (torch::cuda::is_available())
    GTEST_SKIP() << "this machine has a CUDA GPU: this test checks the refusal on a machine without one";
  // Refused before the rendezvous: no rank waits for a peer that cannot come.
  auto run = run_qtft(dir_, train_args(" --device cuda --dist-timeout 5"),
                      "WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=1");
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--device cuda under data parallelism uses NCCL"));
  EXPECT_THAT(run.err, ::testing::AnyOf(HasSubstr("this machine has no CUDA GPU"), HasSubstr("built without it")));
  EXPECT_EQ(count(run.err, "\n"), 1u) << run.err;
}

TEST_F(DistributedCli, CheckpointingChangesNoBitUnderDataParallelism) {
  // Observers update once per step (the step mode, data parallelism's default), from the
  // ranks' min and max; the recompute uses the step's parameters and records nothing.
  const std::string common =
      " --nproc 2 --batch-size 8 --epochs 1 --max-batches-per-epoch 3 --use-qat "
      "--qat-calibration-batches 2";
  ASSERT_EQ(run_qtft(dir_, train_args(common + " --save-model " + dir_.file("plain.safetensors"))).exit_code, 0);
  auto checkpointed = run_qtft(dir_, train_args(common +
                                                " --use-gradient-checkpointing --checkpoint-policy lstm "
                                                "--save-model " +
                                                dir_.file("ckpt.safetensors")));
  ASSERT_EQ(checkpointed.exit_code, 0) << checkpointed.err;
  auto diff = run_qtft(dir_, "diff " + dir_.file("plain.safetensors") + " " + dir_.file("ckpt.safetensors"));
  EXPECT_EQ(diff.exit_code, 0) << diff.out;
}

TEST_F(DistributedCli, ARendezvousThatTimesOutEndsWithOneClearError) {
  // Rank 0 of 2 whose peer never comes.
  const auto port = std::to_string(dist::free_loopback_port());
  auto run = run_qtft(dir_, train_args(" --dist-timeout 2"),
                      "WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("qtft: error: distributed: the rendezvous at 127.0.0.1:" + port +
                                 " failed on rank 0 of 2: wait timeout after 2000ms"));
  // Nothing but that line: no c10d log lines, no backtrace.
  EXPECT_EQ(count(run.err, "\n"), 1u) << run.err;
}

TEST_F(DistributedCli, NprocRefusesWhatItCannotRun) {
  auto run = run_qtft(dir_, train_args(" --nproc 2 --compare-accuracy"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--compare-accuracy trains its models in one process"));
  run = run_qtft(dir_, train_args(" --nproc 0"));
  EXPECT_EQ(run.exit_code, 2);
  run =
      run_qtft(dir_, train_args(" --nproc 2"), "WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("leave it out under torchrun"));
}

}  // namespace
}  // namespace qtft
