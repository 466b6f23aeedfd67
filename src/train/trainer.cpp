#include "qtft/train/trainer.h"

#include <torch/optim/adam.h>

#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>
#include <set>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/batch_order.h"
#include "qtft/dist/ranks.h"
#include "qtft/memory/autocast.h"
#include "qtft/memory/device_settings.h"
#include "qtft/memory/memory_tracker.h"
#include "qtft/quant/observers.h"
#include "qtft/train/detail/checkpoint_choice.h"
#include "qtft/train/fused_adam.h"
#include "qtft/train/step_memory.h"
#include "qtft/train/train_step.h"

namespace qtft::train {
namespace {

using Clock = std::chrono::steady_clock;

// A step that ran out of memory, on its way from train_step to fit, which ends the run with it.
class StepOutOfMemory : public Error {
 public:
  using Error::Error;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

nlohmann::json epoch_json(const EpochSummary& s) {
  return {{"epoch", s.epoch},
          {"train_loss", s.train_loss},
          {"val_loss", s.val.loss},
          {"val_rmse", s.val.rmse},
          {"val_mae", s.val.mae},
          {"val_p50", s.val.p50},
          {"val_p90", s.val.p90},
          {"val_in_target_units", eval::to_json(s.val.in_target_units)},
          {"learning_rate", s.learning_rate},
          {"seconds", s.seconds},
          {"samples_per_second", s.samples_per_second},
          {"improved", s.improved},
          {"peak_memory_bytes", s.peak_memory_bytes},
          {"collectives_per_step", s.collectives_per_step}};
}

// A saved training state fits the model it resumes: every parameter's Adam moments with
// its shape, consistent counters, a valid generator state. Throws qtft::Error listing what
// does not, before the trainer changes anything.
void check_resume_state(const torch::nn::Module& model, const artifact::TrainingState& saved, c10::Device device) {
  std::map<std::string, at::Tensor> moments(saved.optimizer.begin(), saved.optimizer.end());
  std::string problems;
  std::set<std::string> expected;
  for (const auto& p : model.named_parameters()) {
    auto exp_avg = moments.find(p.key() + ".exp_avg");
    if (exp_avg == moments.end()) continue;
    for (const char* part : {".exp_avg", ".exp_avg_sq", ".step"}) {
      const std::string name = p.key() + part;
      expected.insert(name);
      auto it = moments.find(name);
      const bool is_step = std::string(part) == ".step";
      if (it == moments.end()) {
        problems += "\n  missing: " + name;
      } else if (is_step ? (it->second.numel() != 1 || it->second.scalar_type() != at::kLong)
                         : (it->second.sizes() != p.value().sizes() ||
                            it->second.scalar_type() != p.value().scalar_type())) {
        problems += "\n  " + name + ": " + std::string(c10::toString(it->second.scalar_type())) + " " +
                    c10::str(it->second.sizes()) + " does not fit parameter " + c10::str(p.value().sizes());
      }
    }
  }
  for (const auto& [name, _] : moments) {
    if (!expected.count(name)) problems += "\n  unexpected: " + name;
  }
  if (!problems.empty()) throw Error("resume state: the optimizer state does not fit the model:" + problems);
  if (saved.epochs_completed < 0 || saved.batches_done_in_epoch < 0 || saved.global_step < 0 || saved.best_epoch < 0 ||
      saved.best_epoch > saved.epochs_completed) {
    throw Error("resume state: inconsistent counters (epochs_completed " + std::to_string(saved.epochs_completed) +
                ", batches_done_in_epoch " + std::to_string(saved.batches_done_in_epoch) + ", best_epoch " +
                std::to_string(saved.best_epoch) + ")");
  }
  if (saved.cpu_rng_state.defined()) {
    try {
      memory::RandomStream(0).set_state(saved.cpu_rng_state);
    } catch (const c10::Error&) {
      throw Error("resume state: resume.rng.cpu is not a random generator state (" +
                  std::string(c10::toString(saved.cpu_rng_state.scalar_type())) + " " +
                  c10::str(saved.cpu_rng_state.sizes()) + ")");
    }
  }
  if (saved.cuda_rng_state.defined() && device.is_cuda()) {
    try {
      memory::RandomStream(0, device).set_cuda_state(saved.cuda_rng_state);
    } catch (const c10::Error&) {
      throw Error("resume state: resume.rng.cuda is not a CUDA random generator state (" +
                  std::string(c10::toString(saved.cuda_rng_state.scalar_type())) + " " +
                  c10::str(saved.cuda_rng_state.sizes()) + ")");
    }
  }
}

}  // namespace

Trainer::Trainer(model::TemporalFusionTransformer model, std::shared_ptr<const data::Dataset> dataset,
                 TrainOptions options, c10::Device device)
    : model_(std::move(model)),
      dataset_(std::move(dataset)),
      options_(std::move(options)),
      device_(device),
      random_(options_.seed, device) {
  if (!dataset_) throw Error("Trainer: no dataset");
  options_.validate();
  memory::require_precision_support(options_.precision, device_);
  model_->set_precision(options_.precision);
  model_->to(device_);
  optimizer_ = std::make_unique<FusedAdam>(
      model_->parameters(), torch::optim::AdamOptions(options_.learning_rate).weight_decay(options_.weight_decay));
  state_.learning_rate = options_.learning_rate;
  state_.config = to_json(options_);
  best_weights_ = artifact::clone_weights(*model_);
  if (options_.checkpoint_policy != memory::CheckpointPolicy::Auto) {
    model_->set_checkpoint_policy(options_.checkpoint_policy);
    checkpoint_policy_chosen_ = true;
  }
}

Trainer::~Trainer() = default;

void Trainer::choose_checkpoint_policy(ProgressReporter& progress) {
  if (checkpoint_policy_chosen_) return;
  // Measured on the batch the run starts with; the measurement puts the random state back.
  const auto batch = first_training_batch(*dataset_, options_);
  const CheckpointChoice choice = train::choose_checkpoint_policy(model_->options(), options_.seed, batch, options_,
                                                                  device_, options_.memory_budget_bytes);
  model_->set_checkpoint_policy(choice.policy);
  if (choice.policy != memory::CheckpointPolicy::None)
    peak_without_checkpointing_ = choice.peak_without_checkpointing();
  checkpoint_policy_chosen_ = true;
  progress.note(choice.summary(options_.memory_budget_bytes));
}

void Trainer::set_learning_rate(double lr) {
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
  }
  state_.learning_rate = lr;
}

void Trainer::resume_from(const artifact::TrainingState& saved, const artifact::NamedTensors& best_weights) {
  check_resume_state(*model_, saved, device_);  // a malformed state leaves the trainer as it was
  std::map<std::string, at::Tensor> moments(saved.optimizer.begin(), saved.optimizer.end());
  artifact::copy_weights_into(*model_, saved.current_weights, "resume state");  // checks all, then copies
  auto& states = optimizer_->state();
  for (const auto& p : model_->named_parameters()) {
    auto exp_avg = moments.find(p.key() + ".exp_avg");
    if (exp_avg == moments.end()) continue;  // a parameter that never had a step
    auto st = std::make_unique<torch::optim::AdamParamState>();
    st->step(moments.at(p.key() + ".step").item<int64_t>());
    st->exp_avg(exp_avg->second.to(device_).clone());
    st->exp_avg_sq(moments.at(p.key() + ".exp_avg_sq").to(device_).clone());
    states[p.value().unsafeGetTensorImpl()] = std::move(st);
  }
  auto keep_config = state_.config;
  state_ = saved;
  state_.config = keep_config;
  // Resuming means continuing up to this run's --epochs, even after a finished run.
  state_.finished = false;
  set_learning_rate(saved.learning_rate);
  if (saved.cpu_rng_state.defined()) random_.set_state(saved.cpu_rng_state);
  // Saved on another kind of device (or before qtft kept it): the seed's CUDA stream stays.
  if (saved.cuda_rng_state.defined()) random_.set_cuda_state(saved.cuda_rng_state);
  best_weights_ = best_weights;
}

void Trainer::continue_after(const artifact::TrainingState& earlier) {
  if (earlier.batches_done_in_epoch != 0) {
    throw Error("a training phase can only take over at an epoch's end, not after batch " +
                std::to_string(earlier.batches_done_in_epoch) + " of epoch " +
                std::to_string(earlier.epochs_completed + 1));
  }
  state_.epochs_completed = earlier.epochs_completed;
  state_.global_step = earlier.global_step;
  state_.history = earlier.history;
  if (earlier.cpu_rng_state.defined()) random_.set_state(earlier.cpu_rng_state);
  if (earlier.cuda_rng_state.defined()) random_.set_cuda_state(earlier.cuda_rng_state);
}

artifact::TrainingState Trainer::state() const {
  artifact::TrainingState s = state_;
  s.current_weights = artifact::clone_weights(*model_);
  s.optimizer.clear();
  const auto& states = optimizer_->state();
  for (const auto& p : model_->named_parameters()) {
    auto it = states.find(p.value().unsafeGetTensorImpl());
    if (it == states.end()) continue;
    const auto& st = static_cast<const torch::optim::AdamParamState&>(*it->second);
    s.optimizer.emplace_back(p.key() + ".exp_avg", st.exp_avg().to(at::kCPU).clone());
    s.optimizer.emplace_back(p.key() + ".exp_avg_sq", st.exp_avg_sq().to(at::kCPU).clone());
    s.optimizer.emplace_back(p.key() + ".step", at::scalar_tensor(st.step(), at::kLong));
  }
  s.cpu_rng_state = random_.state();
  if (random_.cuda_state().defined()) s.cuda_rng_state = random_.cuda_state();
  return s;
}

artifact::NamedTensors Trainer::best_weights() const { return best_weights_; }

dist::Ranks::StepOutcome Trainer::train_step(const std::vector<size_t>& indices, bool stop_requested) {
  const int64_t collectives_before = ranks_.collectives();
  int64_t held_before = 0, state_before = 0;
  if (track_memory_) {
    // The step's own footprint: what its state held before it began plus how far the
    // step rose above everything held then (other tensors of the process do not count).
    held_before = memory::memory_stats(device_).current_bytes;
    state_before = training_state_bytes(*model_, *optimizer_);
    memory::reset_peak(device_);
  }
  at::Tensor loss;
  double value = 0.0;
  const auto average = ranks_.gradient_averaging(*model_);
  // A copy of the handles, not of the states: a step leaves the stream new tensors, so these
  // stay as they were, and putting them back allocates nothing (there may be nothing left).
  const memory::RandomStream stream_before = random_;
  try {
    const auto batch = data::make_batch(*dataset_, data::Split::Train, indices);
    random_.run([&] { loss = training_step(model_, *optimizer_, batch, options_.clip_norm, device_, average); });
    value = loss.item<double>();  // waits for the step on CUDA, where its errors surface
  } catch (const c10::OutOfMemoryError& e) {
    // Not taken: a run resumed from the checkpoint takes this step again, with its masks.
    random_ = stream_before;
    throw StepOutOfMemory(e.what_without_backtrace());
  }
  const auto outcome = ranks_.end_step(*model_, value, stop_requested);
  epoch_collectives_ += ranks_.collectives() - collectives_before;
  if (track_memory_) {
    const int64_t step_peak = memory::memory_stats(device_).peak_bytes - held_before + state_before;
    epoch_peak_memory_ = std::max(epoch_peak_memory_, step_peak);
  }
  ++state_.global_step;
  return outcome;
}

bool Trainer::end_epoch(EpochSummary& s, const std::function<bool()>& stop_requested) {
  // Under data parallelism each rank validates its share of the batches; the metrics are
  // the same bits either way.
  auto val =
      ranks_.evaluate(model_, *dataset_, data::Split::Validation, options_.eval_batch_size, device_, stop_requested);
  // Stopped mid-validation: nothing of the epoch's end is recorded yet, so a resumed run
  // (its state says the epoch's batches are done) validates the epoch again, exactly.
  if (!val) return false;
  s.val = *val;
  s.improved = s.val.loss < state_.best_val_loss;
  if (s.improved) {
    state_.best_val_loss = s.val.loss;
    state_.best_epoch = s.epoch;
    state_.epochs_without_improvement = 0;
    best_weights_ = artifact::clone_weights(*model_);
  } else {
    ++state_.epochs_without_improvement;
  }
  switch (options_.lr_schedule) {
    case LrSchedule::None: break;
    case LrSchedule::Plateau:
      state_.plateau_wait = s.improved ? 0 : state_.plateau_wait + 1;
      if (state_.plateau_wait >= options_.plateau_patience) {
        set_learning_rate(state_.learning_rate * options_.plateau_factor);
        state_.plateau_wait = 0;
      }
      break;
    case LrSchedule::Cosine: {
      double progress = static_cast<double>(s.epoch) / static_cast<double>(options_.epochs);
      set_learning_rate(0.5 * options_.learning_rate * (1.0 + std::cos(std::numbers::pi * progress)));
      break;
    }
  }
  state_.history.push_back(epoch_json(s));
  state_.epochs_completed = s.epoch;
  state_.batches_done_in_epoch = 0;
  state_.epoch_loss_sum = 0.0;
  state_.epoch_samples = 0;
  return true;
}

std::string Trainer::out_of_memory_message(int64_t epoch, size_t batch, const std::string& cause) const {
  std::string where = "out of memory on " + device_.str() + " in epoch " + std::to_string(epoch);
  where += batch > 0 ? ", batch " + std::to_string(batch) + " (step " + std::to_string(state_.global_step + 1) + ")"
                     : "'s validation (--eval-batch-size " + std::to_string(options_.eval_batch_size) + ")";
  if (track_memory_) {
    const auto stats = memory::memory_stats(device_);
    where += ": allocated peak " + format_bytes(static_cast<uint64_t>(stats.peak_bytes));
    if (device_.is_cuda()) where += ", reserved peak " + format_bytes(static_cast<uint64_t>(stats.peak_reserved_bytes));
    if (const int64_t limit = memory::gpu_memory_limit(device_); limit > 0) {
      where += " under --gpu-memory-limit " + format_bytes(static_cast<uint64_t>(limit));
    }
  }
  // LibTorch's message is a paragraph (on fragmentation, on the allocator's settings); its
  // first two sentences say what failed and how much was asked for.
  const size_t first_end = cause.find(". ");
  const size_t second_end = first_end == std::string::npos ? first_end : cause.find(". ", first_end + 2);
  const std::string what = cause.substr(0, second_end);
  const std::string smaller =
      batch > 0 ? "try --use-gradient-checkpointing, a smaller --batch-size" : "try a smaller --eval-batch-size";
  return where + " (" + what + "); " + smaller + (device_.is_cuda() ? " or a larger --gpu-memory-limit" : "");
}

void Trainer::set_data_parallel(std::shared_ptr<dist::Collective> group) { ranks_ = dist::Ranks(std::move(group)); }

TrainResult Trainer::fit(ProgressReporter& progress, const std::function<bool()>& stop_requested) {
  TrainResult result;
  auto run_start = Clock::now();
  const size_t windows = dataset_->num_windows(data::Split::Train);
  // Across ranks each step takes batch_size windows per rank from one shared order.
  const size_t global_batch = options_.batch_size * static_cast<size_t>(ranks_.count());
  data::BatchOrder order(windows, global_batch, options_.seed, true);
  size_t batches = ranks_.steps_per_epoch(windows, options_.batch_size);
  // Every rank must leave at the same step, whichever of them was asked to stop.
  const auto stop = ranks_.stop_on_any_rank(stop_requested);
  const auto observer_update = resolve_observer_update(options_.observer_update, ranks_.count());
  const dist::Ranks::ObserverUpdates observer_updates(model_, ranks_, observer_update);
  ranks_.broadcast_weights(*model_);
  if (options_.max_batches_per_epoch > 0) {
    batches = std::min(batches, static_cast<size_t>(options_.max_batches_per_epoch));
  }
  choose_checkpoint_policy(progress);
  track_memory_ = device_.is_cuda() || memory::cpu_memory_tracking_installed();
  // The step of the run (counted from 1) after which the observers freeze; 0: never. The
  // small margin keeps a fraction such as 0.3 x 10 batches at step 3, not 4.
  const auto freeze_step =
      static_cast<int64_t>(std::ceil(options_.freeze_observers_after_epochs * static_cast<double>(batches) - 1e-9));
  model_->train();
  while (state_.epochs_completed < options_.epochs && !state_.finished) {
    if (pause_after_epoch_ > 0 && state_.epochs_completed >= pause_after_epoch_) {
      result.paused = true;
      break;
    }
    const int64_t epoch = state_.epochs_completed + 1;
    auto epoch_order = order.epoch_order(epoch - 1);
    progress.epoch_started(epoch, options_.epochs, batches);
    auto epoch_start = Clock::now();
    epoch_peak_memory_ = -1;
    epoch_collectives_ = 0;
    int64_t samples_this_run = 0;
    const auto start_batch = static_cast<size_t>(state_.batches_done_in_epoch);
    for (size_t b = start_batch; b < batches; ++b) {
      // This rank's share of the step's windows (all of them alone).
      const auto [first, end] = ranks_.share_of_step(b, windows, options_.batch_size);
      std::vector<size_t> indices = epoch_order.slice(first, end);
      const size_t global_first = b * global_batch;
      const auto global_size = static_cast<int64_t>(std::min(global_first + global_batch, windows) - global_first);
      dist::Ranks::StepOutcome step;
      try {
        step = train_step(indices, stop_requested && stop_requested());
      } catch (const StepOutOfMemory& e) {
        result.out_of_memory = out_of_memory_message(epoch, b + 1, e.what());
        result.interrupted = true;
        break;
      }
      const double loss = step.mean_loss;
      if (!std::isfinite(loss)) {
        throw Error("training diverged: the loss became " + std::to_string(loss) + " at epoch " +
                    std::to_string(epoch) + ", batch " + std::to_string(b + 1) +
                    "; try a lower --learning-rate or a --clip-norm");
      }
      state_.epoch_loss_sum += loss * static_cast<double>(global_size);
      state_.epoch_samples += global_size;
      state_.batches_done_in_epoch = static_cast<int64_t>(b + 1);
      // Two-phase QAT: observers learn the ranges first, then stay fixed while weights adapt.
      // Once, at that step: the frozen flags are saved, so a resumed run keeps them.
      if (freeze_step > 0 && static_cast<int64_t>((epoch - 1) * batches + b + 1) == freeze_step) {
        quant::freeze_observers(*model_);
      }
      samples_this_run += global_size;
      double elapsed = seconds_since(epoch_start);
      double rate = static_cast<double>(samples_this_run) / std::max(elapsed, 1e-9);
      double done_here = static_cast<double>(b + 1 - start_batch);
      double eta = elapsed / done_here * static_cast<double>(batches - b - 1);
      progress.batch_done(b + 1, batches, loss, rate, eta);
      if (step.stop) {
        result.interrupted = true;
        break;
      }
    }
    // A stop asked for during the epoch's last step must not wait for the validation pass:
    // the state says the epoch's batches are done, and a resumed run validates it then.
    if (!result.interrupted && stop && stop()) result.interrupted = true;
    if (result.interrupted) break;
    EpochSummary summary;
    summary.epoch = epoch;
    summary.epochs = options_.epochs;
    summary.train_loss = state_.epoch_loss_sum / static_cast<double>(std::max<int64_t>(1, state_.epoch_samples));
    summary.seconds = seconds_since(epoch_start);
    summary.samples_per_second = static_cast<double>(samples_this_run) / std::max(summary.seconds, 1e-9);
    summary.learning_rate = state_.learning_rate;  // the rate this epoch ran with
    summary.peak_memory_bytes = epoch_peak_memory_;
    summary.collectives_per_step =
        static_cast<double>(epoch_collectives_) / static_cast<double>(std::max<size_t>(1, batches - start_batch));
    summary.peak_memory_without_checkpointing_bytes = peak_without_checkpointing_;
    bool validated = false;
    try {
      validated = end_epoch(summary, stop);
    } catch (const c10::OutOfMemoryError& e) {
      // As a stop during validation: nothing of the epoch's end is recorded yet, and the
      // resumed run validates the epoch again.
      result.out_of_memory = out_of_memory_message(epoch, 0, e.what_without_backtrace());
      result.interrupted = true;
      break;
    }
    if (!validated) {
      result.interrupted = true;
      break;
    }
    progress.epoch_finished(summary);
    model_->train();
    if (options_.patience > 0 && state_.epochs_without_improvement >= options_.patience) {
      result.stopped_early = true;
      state_.finished = true;
    }
  }
  if (!result.interrupted && !result.paused) state_.finished = true;
  result.epochs_completed = state_.epochs_completed;
  result.best_epoch = state_.best_epoch;
  if (state_.best_epoch > 0) {
    const auto& h = state_.history.at(static_cast<size_t>(state_.best_epoch - 1));
    result.best_val.loss = h.at("val_loss").get<double>();
    result.best_val.rmse = h.at("val_rmse").get<double>();
    result.best_val.mae = h.at("val_mae").get<double>();
    result.best_val.p50 = h.at("val_p50").get<double>();
    result.best_val.p90 = h.at("val_p90").get<double>();
    // A run saved before the key existed resumes without the figures (NaN).
    result.best_val.in_target_units =
        eval::target_unit_figures_from_json(h.value("val_in_target_units", nlohmann::json()));
  }
  result.train_seconds = seconds_since(run_start);
  return result;
}

}  // namespace qtft::train
