// The backend conformance suite, supports_op: how much of the op catalogue the backend claims, invalid nodes it
// must refuse, and every claimed catalogue case against the CPU reference (BackendOpConformance).
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "conformance/backend_conformance.h"
#include "conformance/suite_util.h"
#include "tessera/build.h"
#include "tessera/cpu.h"

namespace tessera::conformance {

TEST_P(BackendConformance, SupportsOpClaims) {
  SCOPED_TRACE(trace());
  const auto& catalogue = op_catalogue();
  size_t claimed = 0, must = 0;  // claimed cases; cases of ops the backend must claim (must_claim)
  std::map<std::string, std::pair<size_t, size_t>> per_op;  // op -> (claimed, total)
  std::vector<std::string> unclaimed, claimed_without_kernel;
  for (const OpCase& c : catalogue) {
    auto inst = instantiate_case(c.build, buft());
    ASSERT_TRUE(inst.ok()) << "catalogue case " << c.name << " does not build: " << inst.status().to_string();
    EXPECT_EQ(inst->out->op, c.op) << c.name;
    const bool ok = unclaimed_nodes(*backend_, *inst->graph).empty();
    const bool required = must_claim(factory(), c.op);
    claimed += ok;
    must += required;
    auto& po = per_op[op_name(c.op)];
    po.first += ok;
    po.second += 1;
    if (!ok && required) unclaimed.push_back(c.name);
    if (ok && factory().expect_full_op_support && !required) claimed_without_kernel.push_back(c.name);
  }
  std::cout << "[ conformance ] " << factory().name << " claims " << claimed << " of " << catalogue.size()
            << " catalogue cases\n";
  for (const auto& [op, counts] : per_op) {
    std::cout << "[ conformance ]   " << op << ": " << counts.first << "/" << counts.second << "\n";
  }
  RecordProperty("catalogue_size", static_cast<int>(catalogue.size()));
  RecordProperty("claimed_cases", static_cast<int>(claimed));
  if (factory().expect_full_op_support) {
    EXPECT_TRUE(unclaimed.empty()) << "unclaimed: " << join(unclaimed);
    EXPECT_EQ(claimed, must) << "claimed, though listed in ops_without_kernels (remove the entry): "
                             << join(claimed_without_kernel);
  }
}

TEST_P(BackendConformance, SupportsOpRejectsInvalidNodes) {
  SCOPED_TRACE(trace());
  Context ctx(no_alloc());
  auto leaf = [&](Type type, std::initializer_list<int64_t> ne) {
    int64_t d[4] = {1, 1, 1, 1};
    int n = 0;
    for (int64_t x : ne) d[n++] = x;
    return ctx.new_tensor(type, n, d);
  };
  auto node = [&](Op op, Type type, std::initializer_list<int64_t> ne, std::initializer_list<Tensor*> srcs) {
    Tensor* t = leaf(type, ne);
    if (!t) return t;
    t->op = op;
    int i = 0;
    for (Tensor* s : srcs) t->src[i++] = s;
    return t;
  };
  Tensor* w = leaf(Type::kF32, {64, 16});
  Tensor* x = leaf(Type::kF32, {64, 4});
  Tensor* x32 = leaf(Type::kF32, {32, 4});
  Tensor* x48 = leaf(Type::kF32, {48, 4});
  Tensor* ix = leaf(Type::kI32, {64, 4});
  Tensor* q4 = leaf(Type::kQ4_0, {64, 4});
  Tensor* fids = leaf(Type::kF32, {4});
  Tensor* a3 = leaf(Type::kF32, {64, 4, 5});
  Tensor* fpos = leaf(Type::kF32, {5});
  Tensor* experts = leaf(Type::kF32, {64, 16, 4});
  Tensor* tokens = leaf(Type::kF32, {64, 2, 5});
  Tensor* fids2 = leaf(Type::kF32, {2, 5});
  Tensor* scores = leaf(Type::kF32, {64, 4, 3});
  Tensor* sinks_f16 = leaf(Type::kF16, {3});
  Tensor* sinks_short = leaf(Type::kF32, {2});
  Tensor* biases = leaf(Type::kF32, {64, 8});
  Tensor* ids25 = leaf(Type::kI32, {2, 5});
  Tensor* ids52 = leaf(Type::kI32, {5, 2});
  Tensor* tokens5 = leaf(Type::kF32, {64, 2, 5});
  Tensor* ipos = leaf(Type::kI32, {5});

  std::vector<std::pair<std::string, Tensor*>> invalid = {
      {"MUL_MAT with an i32 src1", node(Op::kMulMat, Type::kF32, {16, 4}, {w, ix})},
      {"MUL_MAT with a missing src0", node(Op::kMulMat, Type::kF32, {16, 4}, {nullptr, x})},
      {"MUL_MAT with a missing src1", node(Op::kMulMat, Type::kF32, {16, 4}, {w, nullptr})},
      {"MUL_MAT with K 64 vs 32", node(Op::kMulMat, Type::kF32, {16, 4}, {w, x32})},
      {"ADD with a q4_0 src0", node(Op::kAdd, Type::kQ4_0, {64, 4}, {q4, x})},
      {"ADD with a src1 that does not broadcast", node(Op::kAdd, Type::kF32, {64, 4}, {x, x48})},
      {"ADD whose result type is not src0's", node(Op::kAdd, Type::kF16, {64, 4}, {x, x})},
      {"MUL with a missing src1", node(Op::kMul, Type::kF32, {64, 4}, {x, nullptr})},
      {"GET_ROWS with f32 ids", node(Op::kGetRows, Type::kF32, {16, 4}, {w, fids})},
      {"GET_ROWS with a missing ids source", node(Op::kGetRows, Type::kF32, {16, 4}, {w, nullptr})},
      {"ROPE with f32 positions", node(Op::kRope, Type::kF32, {64, 4, 5}, {a3, fpos})},
      {"ROPE with YaRN ext_factor 2", node(Op::kRope, Type::kF32, {64, 4, 5}, {a3, ipos})},
      {"ROPE with YaRN and n_ctx_orig 0", node(Op::kRope, Type::kF32, {64, 4, 5}, {a3, ipos})},
      {"MUL_MAT_ID with f32 ids", node(Op::kMulMatId, Type::kF32, {16, 2, 5}, {experts, tokens, fids2})},
      {"UNARY with an unknown UnaryOp", node(Op::kUnary, Type::kF32, {64, 4}, {x})},
      {"SOFT_MAX with f16 sinks", node(Op::kSoftMax, Type::kF32, {64, 4, 3}, {scores, nullptr, sinks_f16})},
      {"SOFT_MAX with sinks for 2 of 3 heads",
       node(Op::kSoftMax, Type::kF32, {64, 4, 3}, {scores, nullptr, sinks_short})},
      {"ADD_ID with f32 ids", node(Op::kAddId, Type::kF32, {64, 2, 5}, {tokens5, biases, fids2})},
      {"ADD_ID with transposed ids", node(Op::kAddId, Type::kF32, {64, 2, 5}, {tokens5, biases, ids52})},
      {"ADD_ID with a missing bias source", node(Op::kAddId, Type::kF32, {64, 2, 5}, {tokens5, nullptr, ids25})},
  };
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  for (auto& [why, t] : invalid) {
    if (t->op == Op::kRope) {
      set_op_param<int32_t>(*t, 0, 64);
      set_op_param<int32_t>(*t, 1, static_cast<int32_t>(RopeMode::kNormal));
      set_op_param<float>(*t, 2, 10000.0f);
      set_op_param<float>(*t, 3, 1.0f);
      if (why.find("YaRN") != std::string::npos) {  // slots 4..8 (tessera/rope.h): n_ctx_orig, ext, attn, betas
        set_op_param<int32_t>(*t, 4, why.find("n_ctx_orig 0") != std::string::npos ? 0 : 4096);
        set_op_param<float>(*t, 5, why.find("ext_factor 2") != std::string::npos ? 2.0f : 1.0f);
        set_op_param<float>(*t, 6, 1.0f);
        set_op_param<float>(*t, 7, 32.0f);
        set_op_param<float>(*t, 8, 1.0f);
      }
    }
    if (t->op == Op::kUnary) set_op_param<int32_t>(*t, 0, 1000);
    set_name(*t, "invalid_node");
  }
  // Placed in the backend's memory, so that the only reason to refuse is the node itself.
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  for (auto& [why, t] : invalid) {
    EXPECT_FALSE(backend_->supports_op(*t)) << "claims an invalid node: " << why << " (" << describe(*t) << ")";
  }
}

// Storage-only types (types.h: every GGUF tensor type past q4_0) have no kernels: a backend never claims a node with
// such a tensor (a leaf, a view of one, an op reading or writing one), and computing one fails with a message instead
// of crashing or writing anything.
TEST_P(BackendConformance, StorageOnlyTypesAreNeverClaimedNorComputed) {
  SCOPED_TRACE(trace());
  Context ctx(no_alloc());
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 2);
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 256, 2);
  std::vector<std::pair<std::string, Tensor*>> refused;
  Graph g;
  Tensor* q6_product = nullptr;
  for (int i = kKernelTypeCount; i < kTypeCount; ++i) {
    const Type t = static_cast<Type>(i);
    Tensor* a = ctx.new_tensor_2d(t, 256, 4);  // 256: a whole number of blocks of every type
    ASSERT_NE(a, nullptr) << tn(t) << ": " << ctx.status().to_string();
    format_name(*a, "a_%s", tn(t).c_str());
    refused.emplace_back(tn(t) + " leaf", a);
    refused.emplace_back("view of a " + tn(t) + " leaf", view_2d(ctx, a, 256, 2, a->nb[1], a->nb[1]));
    refused.emplace_back("GET_ROWS of " + tn(t), get_rows(ctx, a, ids));
    refused.emplace_back("CONT of " + tn(t), cont(ctx, a));
    if (type_traits(t).is_quantized) {
      Tensor* p = mul_mat(ctx, a, x);
      refused.emplace_back("MUL_MAT with " + tn(t) + " weights", p);
      if (t == Type::kQ6_K) q6_product = p;
    }
  }
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  ASSERT_NE(q6_product, nullptr);
  CONF_ASSERT_OK(g.build_forward(q6_product));
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  for (const auto& [why, t] : refused) {
    EXPECT_FALSE(backend_->supports_op(*t)) << "claims " << why << " (" << describe(*t) << ")";
  }
  const std::vector<uint8_t> out_before = read_bytes(*q6_product);
  EXPECT_NE(backend_->graph_compute(g), ComputeStatus::kSuccess) << "computed a q6_k MUL_MAT";
  EXPECT_FALSE(backend_->last_error().empty());
  EXPECT_TRUE(BytesEqual(out_before, read_bytes(*q6_product))) << "the refused node wrote its result";
}

TEST_P(BackendOpConformance, MatchesCpuReference) {
  SCOPED_TRACE(trace());
  const OpCase& c = op_case();
  SCOPED_TRACE("case " + c.name);
  auto be = instantiate_case(c.build, *backend_->default_buffer_type());
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  const auto unclaimed = unclaimed_nodes(*backend_, *be->graph);
  if (!unclaimed.empty()) {
    ASSERT_FALSE(must_claim(factory(), c.op)) << "unclaimed nodes: " << join(unclaimed);
    GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  }
  auto ref = instantiate_case(c.build, *cpu::buffer_type());
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  CONF_ASSERT_OK(fill_leafs_identically(*ref, *be, rng_));
  // Inputs as written, to check afterwards that compute left them alone.
  std::vector<std::vector<uint8_t>> inputs;
  for (const auto& l : be->leafs) inputs.push_back(read_bytes(*l.tensor));

  ASSERT_EQ(cpu_->graph_compute(*ref->graph), ComputeStatus::kSuccess) << "reference: " << cpu_->last_error();
  ASSERT_EQ(backend_->graph_compute(*be->graph), ComputeStatus::kSuccess) << backend_->last_error();
  EXPECT_TRUE(outputs_match(*ref->out, *be->out, nmse_tolerance(factory(), *be->out)));
  for (size_t i = 0; i < be->leafs.size(); ++i) {
    const Tensor* leaf = be->leafs[i].tensor;
    if (be->out->view_src == leaf) continue;  // CPY / SET_ROWS write into their destination leaf
    EXPECT_TRUE(BytesEqual(inputs[i], read_bytes(*leaf))) << "input " << describe(*leaf) << " modified by compute";
  }
}

}  // namespace tessera::conformance
