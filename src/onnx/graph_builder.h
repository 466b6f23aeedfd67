#pragma once

// A thin writer of ONNX nodes and constants over the ONNX library's GraphProto: unique
// value names, tensors copied from LibTorch, attributes by kind. It knows nothing of the
// TFT (tft_graph.h emits that).
#include <ATen/core/Tensor.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace qtft::onnx_export {

// One attribute of a node: an integer, a float, a list of integers or a string.
struct Attribute {
  Attribute(std::string name, int64_t value);
  Attribute(std::string name, float value);
  Attribute(std::string name, std::vector<int64_t> values);
  Attribute(std::string name, std::string value);
  ONNX_NAMESPACE::AttributeProto proto;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(ONNX_NAMESPACE::GraphProto& graph) : graph_(graph) {}

  // A constant (an initializer) holding `tensor` (float32, int64, int8, uint8 or bool),
  // named after `hint`; returns its value name.
  std::string constant(const std::string& hint, const at::Tensor& tensor);
  std::string int64s(const std::string& hint, const std::vector<int64_t>& values);  // int64 [n]
  std::string scalar(const std::string& hint, float value);                         // float []

  // A node of `op` over `inputs` ("" for an optional input left out) with one output, named
  // after `hint`; returns the output's name.
  std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& hint,
                   std::initializer_list<Attribute> attributes = {});
  // The same with `outputs` outputs.
  std::vector<std::string> node(const std::string& op, const std::vector<std::string>& inputs, int outputs,
                                const std::string& hint, std::initializer_list<Attribute> attributes = {});

  // A graph input or output of element type `type` (TensorProto_DataType) and `shape`,
  // where a negative size is the dynamic dimension `dynamic` (the batch).
  void input(const std::string& name, int32_t type, const std::vector<int64_t>& shape, const std::string& dynamic);
  // `value` as the graph output `name`.
  void output(const std::string& value, const std::string& name, int32_t type, const std::vector<int64_t>& shape,
              const std::string& dynamic);

  // How many nodes of each operator the graph holds.
  std::map<std::string, int64_t> operator_counts() const;

 private:
  std::string fresh(const std::string& hint);
  ONNX_NAMESPACE::GraphProto& graph_;
  std::set<std::string> taken_;              // every value name given out
  std::map<std::string, int64_t> suffixes_;  // the last suffix given to each hint
};

}  // namespace qtft::onnx_export
