// Int8 exports: the integers times their scales are the fake-quantized weights bit for bit,
// so a model loaded from an int8 file forecasts exactly what the QAT model does; the file
// is a fraction of the FP32 file's size; and every malformed or truncated file is refused
// with a message naming the file and the tensor.
#include <ATen/ops/equal.h>
#include <c10/core/GradMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "qtft/artifact/int8_file.h"
#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/data/features/batch.h"
#include "qtft/io/tensor_file.h"
#include "qtft/model/model_building.h"
#include "qtft/train/calibration.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace qtft::artifact {
namespace {

using ::testing::HasSubstr;

const c10::Device kCpu(c10::kCPU);

struct Exported {
  test::TempDir dir;
  data::Dataset dataset;
  std::string qat_path, int8_path;
  Int8ExportSummary summary;
};

// A calibrated QAT model saved as a model file, and its int8 export.
std::unique_ptr<Exported> export_tiny(int64_t weight_bits, int64_t hidden = 8, int64_t activation_bits = 8) {
  auto e = std::make_unique<Exported>();
  e->dataset = test::tiny_dataset();
  auto options = test::tiny_model_options(e->dataset);
  options.use_qat(true).weight_bits(weight_bits).activation_bits(activation_bits).hidden_size(hidden);
  auto model = model::build_model(options, 7);
  train::calibrate_observers(model, e->dataset, 2, 16, 1, kCpu);
  e->qat_path = e->dir.file("qat.safetensors");
  e->int8_path = e->dir.file("model.int8.safetensors");
  save_model_file(e->qat_path,
                  {options, e->dataset.schema(), e->dataset.options(), named_weights(*model), std::nullopt});
  e->summary = export_int8_file(load_model_file(e->qat_path), e->qat_path, e->int8_path);
  return e;
}

void expect_same_forecasts(const Exported& e) {
  auto qat = load_model(e.qat_path, kCpu);
  auto int8 = load_model(e.int8_path, kCpu, Int8Kernels::dequantized);
  EXPECT_EQ(int8.integer_products.products.in_use, 0);
  EXPECT_TRUE(int8.file.int8_weights);
  EXPECT_TRUE(int8.model->weights_prequantized());
  qat.model->eval();
  int8.model->eval();
  std::vector<size_t> indices{0, 3, 8};
  auto batch = data::make_batch(e.dataset, data::Split::Validation, indices);
  auto a = qat.model->forward(batch.observed, batch.known, batch.symbol);
  auto b = int8.model->forward(batch.observed, batch.known, batch.symbol);
  EXPECT_TRUE(at::equal(a.quantiles, b.quantiles));
  EXPECT_TRUE(at::equal(a.attention, b.attention));
  EXPECT_TRUE(at::equal(a.encoder_weights, b.encoder_weights));
}

TEST(Int8File, EightBitExportForecastsBitForBitWhatTheQatModelDoes) {
  auto e = export_tiny(8);
  expect_same_forecasts(*e);
  auto file = io::load_tensor_file(e->int8_path);
  const at::Tensor* q = file.find("int8.positionwise_grn.fc1.linear.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->scalar_type(), at::kChar);
  EXPECT_EQ(q->sizes(), (std::vector<int64_t>{8, 8}));
  EXPECT_TRUE(q->abs().le(127).all().item<bool>());
  // Symmetric per-channel scales put each row's largest weight on the end of the range.
  EXPECT_TRUE(q->abs().amax(1).eq(127).all().item<bool>());
  EXPECT_NE(file.find("int8.symbol_embedding.weight"), nullptr);
  EXPECT_NE(file.find("int8.lstm_encoder.weight_hh_l0"), nullptr);
  EXPECT_NE(file.find("model.positionwise_grn.fc1.linear.bias"), nullptr);
  EXPECT_NE(file.find("model.positionwise_grn.fc1.output_quant.scale"), nullptr);
  EXPECT_EQ(file.find("model.positionwise_grn.fc1.linear.weight"), nullptr);
}

TEST(Int8File, FourBitExportPacksTwoValuesPerByteAndForecastsTheSame) {
  auto e = export_tiny(4);
  expect_same_forecasts(*e);
  auto file = io::load_tensor_file(e->int8_path);
  const at::Tensor* even = file.find("int8.positionwise_grn.fc1.linear.weight");  // 8 columns
  const at::Tensor* odd = file.find("int8.observed_embeddings.0.linear.weight");  // 1 column, padded
  ASSERT_NE(even, nullptr);
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(even->scalar_type(), at::kByte);
  EXPECT_EQ(even->sizes(), (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(odd->sizes(), (std::vector<int64_t>{8, 1}));
  // One value per row in the low nibble, whose extreme is +-7: 0x07 or 0x09 (-7).
  EXPECT_TRUE((odd->eq(0x07) | odd->eq(0x09)).all().item<bool>());
}

// The products an int8 model can run in integers, counted from the architecture: each
// GRN's gate (two), the first layer of each variable's GRN, and the gate after attention.
int64_t eligible_integer_products(const model::TftOptions& o) {
  const int64_t variables = 1 + (o.num_observed() + o.num_known()) + o.num_known();
  const int64_t selectors = (o.num_observed() + o.num_known() > 1 ? 1 : 0) + (o.num_known() > 1 ? 1 : 0);
  const int64_t grns = variables + selectors + 4 /* static contexts */ + 2 /* enrichment, position-wise */;
  return 2 * grns + variables + 2;
}

// The largest difference between two models' quantile forecasts, in steps of the output
// layer's quantization.
double forecast_difference_in_output_steps(LoadedModel& a, LoadedModel& b, const data::Dataset& d) {
  a.model->eval();
  b.model->eval();
  std::vector<size_t> indices{0, 3, 8, 11};
  auto batch = data::make_batch(d, data::Split::Validation, indices);
  c10::NoGradGuard no_grad;
  const at::Tensor qa = a.model->forward(batch.observed, batch.known, batch.symbol).quantiles;
  const at::Tensor qb = b.model->forward(batch.observed, batch.known, batch.symbol).quantiles;
  const double step = a.model->quantile_outputs->output_layer->output_quant->qparams().scale;
  return (qa - qb).abs().max().item<double>() / step;
}

TEST(Int8File, IntegerProductsRunWhereverAnObserverFeedsTheLayer) {
  // 7-bit activations: no weight can saturate the kernel, so every eligible product runs.
  auto e = export_tiny(8, 8, /*activation_bits=*/7);
  auto qat = load_model(e->qat_path, kCpu);
  auto int8 = load_model(e->int8_path, kCpu);
  const auto& summary = int8.integer_products;
  EXPECT_EQ(summary.products.eligible, eligible_integer_products(qat.file.options));
  EXPECT_EQ(summary.products.in_use, summary.products.eligible);
  EXPECT_GT(summary.dense_layers, summary.products.eligible);
  EXPECT_THAT(describe_int8_kernels(int8), HasSubstr("integer products: " + std::to_string(summary.products.in_use)));
  // The integer sums are exact, so only float rounding separates the two models, and the
  // output's own quantization absorbs nearly all of it.
  EXPECT_LE(forecast_difference_in_output_steps(qat, int8, e->dataset), 2.0);
}

TEST(Int8File, EightBitActivationsKeepSaturatingProductsInFloat) {
  // 4-bit weights cannot saturate at 8-bit activations; 8-bit weights mostly can.
  auto four = export_tiny(4);
  auto int4 = load_model(four->int8_path, kCpu);
  auto qat4 = load_model(four->qat_path, kCpu);
  EXPECT_EQ(int4.integer_products.products.in_use, eligible_integer_products(int4.file.options));
  EXPECT_LE(forecast_difference_in_output_steps(qat4, int4, four->dataset), 2.0);

  auto eight = export_tiny(8);
  auto int8 = load_model(eight->int8_path, kCpu);
  const auto& products = int8.integer_products.products;
  EXPECT_EQ(products.eligible, eligible_integer_products(int8.file.options));
  EXPECT_LT(products.in_use, products.eligible);
  EXPECT_THAT(describe_int8_kernels(int8), HasSubstr("would saturate"));
  auto qat8 = load_model(eight->qat_path, kCpu);
  EXPECT_LE(forecast_difference_in_output_steps(qat8, int8, eight->dataset), 2.0);
  EXPECT_THAT(describe_int8_kernels(load_model(eight->int8_path, kCpu, Int8Kernels::dequantized)),
              HasSubstr("in float: dequantized kernels were asked for"));
  EXPECT_THROW(parse_int8_kernels("fast", "--int8-kernels"), UsageError);
}

TEST(Int8File, IsAtLeastThreeAndAHalfTimesSmallerThanTheFp32Weights) {
  auto e = export_tiny(8, /*hidden=*/160);  // the paper configuration's width
  auto qat = load_model(e->qat_path, kCpu);
  auto fp32_options = qat.file.options;
  fp32_options.use_qat(false);
  auto fp32 = model::build_model(fp32_options, 7);
  const std::string fp32_path = e->dir.file("fp32.safetensors");
  save_model_file(fp32_path,
                  {fp32_options, e->dataset.schema(), e->dataset.options(), named_weights(*fp32), std::nullopt});
  const double ratio =
      static_cast<double>(std::filesystem::file_size(fp32_path)) / static_cast<double>(e->summary.file_bytes);
  EXPECT_GE(ratio, 3.5) << "FP32 " << std::filesystem::file_size(fp32_path) << " bytes, int8 " << e->summary.file_bytes;
  EXPECT_EQ(e->summary.file_bytes, std::filesystem::file_size(e->int8_path));
  EXPECT_GT(e->summary.quantized_values, 4 * e->summary.float_values);
}

TEST(Int8File, RefusesModelsWithoutCalibratedQuantization) {
  test::TempDir dir;
  auto d = test::tiny_dataset();
  auto options = test::tiny_model_options(d);
  const auto out = dir.file("out.int8.safetensors");
  ModelFile fp32{options, d.schema(), d.options(), named_weights(*model::build_model(options, 1)), std::nullopt};
  EXPECT_THAT([&] { export_int8_file(fp32, "fp32.safetensors", out); },
              ::testing::ThrowsMessage<Error>(HasSubstr("fp32.safetensors: not a QAT model")));
  options.use_qat(true);
  ModelFile fresh{options, d.schema(), d.options(), named_weights(*model::build_model(options, 1)), std::nullopt};
  EXPECT_THAT([&] { export_int8_file(fresh, "fresh.safetensors", out); },
              ::testing::ThrowsMessage<Error>(HasSubstr("observers never saw data")));
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Int8File, AnInt8ModelCannotBeSavedAsAModelFileOrQuantizedAgain) {
  auto e = export_tiny(8);
  auto int8 = load_model(e->int8_path, kCpu);
  EXPECT_THAT([&] { save_model_file(e->dir.file("again.safetensors"), int8.file); },
              ::testing::ThrowsMessage<Error>(HasSubstr("saved only by qtft export-int8")));
  EXPECT_THAT([&] { convert_to_qat(int8, 8, 8, kCpu); },
              ::testing::ThrowsMessage<Error>(HasSubstr("quantized already")));
}

// Rewrites the int8 file with one change and expects the load to name the problem.
class MalformedInt8File : public ::testing::Test {
 protected:
  void SetUp() override { e_ = export_tiny(8); }
  void expect_refused(const std::function<void(io::TensorFile&)>& change, const std::string& message) {
    auto file = io::load_tensor_file(e_->int8_path);
    change(file);
    const auto path = e_->dir.file("bad.int8.safetensors");
    io::save_tensor_file(path, file);
    EXPECT_THAT([&] { load_model_file(path); }, ::testing::ThrowsMessage<Error>(HasSubstr(path + ": " + message)));
  }
  at::Tensor& tensor(io::TensorFile& file, const std::string& name) {
    for (auto& [n, t] : file.tensors) {
      if (n == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
  }
  std::unique_ptr<Exported> e_;
  const std::string weight_ = "int8.positionwise_grn.fc2.linear.weight";
};

TEST_F(MalformedInt8File, ValueOutsideTheWeightRange) {
  expect_refused([&](io::TensorFile& f) { tensor(f, weight_).view(-1)[3] = -128; },
                 "tensor " + weight_ + " holds values outside [-127, 127]");
}

TEST(Int8File, IntegerProductsStayOnTheCpuWhenAGpuIsAskedFor) {
  // Decided from the file before any CUDA work, so it holds on a machine without a GPU.
  auto e = export_tiny(8, 8, 7);
  const c10::Device gpu(c10::kCUDA, 0);
  auto int8 = load_model(e->int8_path, gpu);
  EXPECT_EQ(int8.device, kCpu);
  EXPECT_GT(int8.integer_products.products.in_use, 0);
  EXPECT_THAT(describe_int8_kernels(int8), HasSubstr(", on the CPU, where integer products run, not on cuda:0"));
  auto qat = load_model(e->qat_path, kCpu);
  EXPECT_EQ(qat.device, kCpu);
  EXPECT_TRUE(qat.device_note.empty());
  EXPECT_EQ(serving_device(gpu, qat.file, Int8Kernels::integer), gpu);
  EXPECT_EQ(serving_device(gpu, int8.file, Int8Kernels::dequantized), gpu);
}

TEST(Int8File, FourBitNibbleOfMinusEightIsRefused) {
  auto e = export_tiny(4);
  auto file = io::load_tensor_file(e->int8_path);
  const std::string weight = "int8.positionwise_grn.fc2.linear.weight";
  for (auto& [name, t] : file.tensors) {
    if (name == weight) t.view(-1)[0] = 0x08;  // low nibble 1000: -8, outside -7..7
  }
  const auto path = e->dir.file("bad4.int8.safetensors");
  io::save_tensor_file(path, file);
  EXPECT_THAT([&] { load_model_file(path); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tensor " + weight + " holds values outside [-7, 7]")));
}

TEST_F(MalformedInt8File, NonPositiveScale) {
  expect_refused([&](io::TensorFile& f) { tensor(f, weight_ + ".scale")[0] = 0.0f; },
                 "tensor " + weight_ + ".scale holds a scale that is not a finite positive number");
}

TEST_F(MalformedInt8File, NonZeroZeroPoint) {
  expect_refused([&](io::TensorFile& f) { tensor(f, weight_ + ".zero_point")[1] = 3; },
                 "tensor " + weight_ + ".zero_point is not all 0");
}

TEST_F(MalformedInt8File, MissingScale) {
  expect_refused(
      [&](io::TensorFile& f) { std::erase_if(f.tensors, [&](auto& t) { return t.first == weight_ + ".scale"; }); },
      "tensor " + weight_ + ".scale is missing");
}

TEST_F(MalformedInt8File, WrongDtype) {
  expect_refused([&](io::TensorFile& f) { tensor(f, weight_) = tensor(f, weight_).to(at::kInt); },
                 "tensor " + weight_ + " is Int [8, 8], expected Char [8, 8]");
}

TEST_F(MalformedInt8File, TensorNotListed) {
  expect_refused([&](io::TensorFile& f) { f.tensors.emplace_back("int8.extra", at::zeros({2}, at::kChar)); },
                 "tensor int8.extra is not listed in qtft.int8");
}

TEST_F(MalformedInt8File, BitWidthOtherThanTheConfiguration) {
  expect_refused([&](io::TensorFile& f) { f.metadata["qtft.int8"] = R"({"weight_bits": 3, "shapes": {}})"; },
                 "qtft.int8: weight_bits must be 8 or 4, got 3");
}

TEST_F(MalformedInt8File, TruncatedFileNamesTheFile) {
  const auto path = e_->dir.file("truncated.int8.safetensors");
  std::filesystem::copy_file(e_->int8_path, path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  EXPECT_THAT([&] { load_model_file(path); }, ::testing::ThrowsMessage<Error>(HasSubstr(path)));
}

}  // namespace
}  // namespace qtft::artifact
