#include "graph_builder.h"

#include <c10/util/Exception.h>

#include <utility>

namespace qtft::onnx_export {
namespace {

using ONNX_NAMESPACE::AttributeProto;
using ONNX_NAMESPACE::TensorProto;
using ONNX_NAMESPACE::ValueInfoProto;

int32_t onnx_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return TensorProto::FLOAT;
    case at::kLong: return TensorProto::INT64;
    case at::kChar: return TensorProto::INT8;
    case at::kByte: return TensorProto::UINT8;
    case at::kBool: return TensorProto::BOOL;
    default: TORCH_CHECK(false, "ONNX export: no constant of ", type);
  }
}

void describe(ValueInfoProto& value, const std::string& name, int32_t type, const std::vector<int64_t>& shape,
              const std::string& dynamic) {
  value.set_name(name);
  auto* tensor = value.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(type);
  auto* dims = tensor->mutable_shape();
  for (int64_t size : shape) {
    auto* dim = dims->add_dim();
    if (size < 0) {
      dim->set_dim_param(dynamic);
    } else {
      dim->set_dim_value(size);
    }
  }
}

}  // namespace

Attribute::Attribute(std::string name, int64_t value) {
  proto.set_name(std::move(name));
  proto.set_type(AttributeProto::INT);
  proto.set_i(value);
}

Attribute::Attribute(std::string name, float value) {
  proto.set_name(std::move(name));
  proto.set_type(AttributeProto::FLOAT);
  proto.set_f(value);
}

Attribute::Attribute(std::string name, std::vector<int64_t> values) {
  proto.set_name(std::move(name));
  proto.set_type(AttributeProto::INTS);
  for (int64_t v : values) proto.add_ints(v);
}

Attribute::Attribute(std::string name, std::string value) {
  proto.set_name(std::move(name));
  proto.set_type(AttributeProto::STRING);
  proto.set_s(std::move(value));
}

std::string GraphBuilder::fresh(const std::string& hint) {
  // hint, then hint_1, hint_2, ...; a name taken already (a hint may end in _1 itself) is skipped.
  std::string name = hint;
  for (int64_t& n = suffixes_[hint]; taken_.count(name) > 0;) name = hint + "_" + std::to_string(++n);
  taken_.insert(name);
  return name;
}

std::string GraphBuilder::constant(const std::string& hint, const at::Tensor& tensor) {
  const at::Tensor values = tensor.detach().cpu().contiguous();
  TensorProto& proto = *graph_.add_initializer();
  proto.set_name(fresh(hint));
  proto.set_data_type(onnx_type(values.scalar_type()));
  for (int64_t size : values.sizes()) proto.add_dims(size);
  // raw_data: the values' bytes, little-endian, as the ONNX format stores them.
  proto.set_raw_data(values.const_data_ptr(), values.nbytes());
  return proto.name();
}

std::string GraphBuilder::int64s(const std::string& hint, const std::vector<int64_t>& values) {
  TensorProto& proto = *graph_.add_initializer();
  proto.set_name(fresh(hint));
  proto.set_data_type(TensorProto::INT64);
  proto.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) proto.add_int64_data(v);
  return proto.name();
}

std::string GraphBuilder::scalar(const std::string& hint, float value) {
  TensorProto& proto = *graph_.add_initializer();
  proto.set_name(fresh(hint));
  proto.set_data_type(TensorProto::FLOAT);
  proto.add_float_data(value);
  return proto.name();
}

std::string GraphBuilder::node(const std::string& op, const std::vector<std::string>& inputs, const std::string& hint,
                               std::initializer_list<Attribute> attributes) {
  return node(op, inputs, 1, hint, attributes).front();
}

std::vector<std::string> GraphBuilder::node(const std::string& op, const std::vector<std::string>& inputs, int outputs,
                                            const std::string& hint, std::initializer_list<Attribute> attributes) {
  auto& proto = *graph_.add_node();
  proto.set_op_type(op);
  const std::string name = fresh(hint);
  proto.set_name(name);
  for (const auto& input : inputs) proto.add_input(input);
  std::vector<std::string> names;
  for (int i = 0; i < outputs; ++i) {
    names.push_back(outputs == 1 ? name : name + ":" + std::to_string(i));
    proto.add_output(names.back());
  }
  for (const auto& attribute : attributes) *proto.add_attribute() = attribute.proto;
  return names;
}

void GraphBuilder::input(const std::string& name, int32_t type, const std::vector<int64_t>& shape,
                         const std::string& dynamic) {
  TORCH_CHECK(taken_.insert(name).second, "ONNX export: the input name ", name, " is taken");
  describe(*graph_.add_input(), name, type, shape, dynamic);
}

void GraphBuilder::output(const std::string& value, const std::string& name, int32_t type,
                          const std::vector<int64_t>& shape, const std::string& dynamic) {
  TORCH_CHECK(taken_.insert(name).second, "ONNX export: the output name ", name, " is taken");
  auto& identity = *graph_.add_node();
  identity.set_op_type("Identity");
  identity.set_name(name);
  identity.add_input(value);
  identity.add_output(name);
  describe(*graph_.add_output(), name, type, shape, dynamic);
}

std::map<std::string, int64_t> GraphBuilder::operator_counts() const {
  std::map<std::string, int64_t> counts;
  for (const auto& node : graph_.node()) ++counts[node.op_type()];
  return counts;
}

}  // namespace qtft::onnx_export
