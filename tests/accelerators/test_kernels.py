"""The kernels of a compiled GPU program, read from HLO text in the compiler's own form: what each
computes (matrix FLOPs, elementwise instructions), what it moves, and how often it runs."""

import pytest

from seqjax.accelerators.kernels import Kernel, from_summary, kernels, summary

GEMM = """
ENTRY %main (a: bf16[128,512], b: bf16[512,256]) -> bf16[128,256] {
  %a = bf16[128,512]{1,0} parameter(0)
  %b = bf16[512,256]{1,0} parameter(1)
  %gemm = (bf16[128,256]{1,0}, s8[4194304]{0}) custom-call(%a, %b), custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":{"alpha_real":1,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}
  ROOT %out = bf16[128,256]{1,0} get-tuple-element(%gemm), index=0
}
"""  # noqa: E501


def test_a_cublas_gemm_computes_twice_its_output_times_its_contraction_and_moves_its_matrices():
    (gemm,) = kernels(GEMM)
    assert (gemm.kind, gemm.dtype) == ("matmul", "bf16")
    assert gemm.flops == 2 * 128 * 256 * 512
    assert gemm.bytes == 2 * (128 * 512 + 512 * 256 + 128 * 256)  # not its scratch space


FUSIONS = """
%fused_exp_add (param_0: f32[16,64], param_1: f32[16,64]) -> f32[16,64] {
  %param_0 = f32[16,64]{1,0} parameter(0)
  %param_1 = f32[16,64]{1,0} parameter(1)
  %exponential.1 = f32[16,64]{1,0} exponential(%param_0)
  ROOT %add.1 = f32[16,64]{1,0} add(%exponential.1, %param_1)
}

%fused_slice (param_0.1: f32[24,64,64], param_1.1: s32[]) -> bf16[64,64] {
  %param_0.1 = f32[24,64,64]{2,1,0} parameter(0)
  %param_1.1 = s32[] parameter(1)
  %zero = s32[] constant(0)
  %ds = f32[1,64,64]{2,1,0} dynamic-slice(%param_0.1, %param_1.1, %zero, %zero), dynamic_slice_sizes={1,64,64}
  %layer = f32[64,64]{1,0} bitcast(%ds)
  ROOT %narrow = bf16[64,64]{1,0} convert(%layer)
}

%fused_update (param_0.2: f32[24,16,64], param_1.2: f32[16,64], param_2.2: s32[]) -> f32[24,16,64] {
  %param_0.2 = f32[24,16,64]{2,1,0} parameter(0)
  %param_1.2 = f32[16,64]{1,0} parameter(1)
  %row = f32[1,16,64]{2,1,0} bitcast(%param_1.2)
  %param_2.2 = s32[] parameter(2)
  %zero.1 = s32[] constant(0)
  ROOT %dus = f32[24,16,64]{2,1,0} dynamic-update-slice(%param_0.2, %row, %param_2.2, %zero.1, %zero.1)
}

%gemm_fusion_dot (parameter_0: bf16[16,64], parameter_1: bf16[64,64]) -> bf16[16,64] {
  %parameter_0 = bf16[16,64]{1,0} parameter(0)
  %parameter_1 = bf16[64,64]{1,0} parameter(1)
  ROOT %dot.1 = bf16[16,64]{1,0} dot(%parameter_0, %parameter_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main (x: f32[16,64], y: f32[16,64], w: f32[24,64,64], acts: f32[24,16,64], i: s32[]) -> f32[24,16,64] {
  %x = f32[16,64]{1,0} parameter(0)
  %y = f32[16,64]{1,0} parameter(1)
  %w = f32[24,64,64]{2,1,0} parameter(2)
  %acts = f32[24,16,64]{2,1,0} parameter(3)
  %i = s32[] parameter(4)
  %elementwise = f32[16,64]{1,0} fusion(%x, %y), kind=kLoop, calls=%fused_exp_add
  %weights = bf16[64,64]{1,0} fusion(%w, %i), kind=kLoop, calls=%fused_slice
  %stored = f32[24,16,64]{2,1,0} fusion(%acts, %elementwise, %i), kind=kLoop, calls=%fused_update
  %narrow_x = bf16[16,64]{1,0} convert(%x)
  ROOT %product = bf16[16,64]{1,0} fusion(%narrow_x, %weights), kind=kCustom, calls=%gemm_fusion_dot
}
"""


def test_a_fusion_moves_its_operands_and_result_once_and_counts_its_instructions_by_unit():
    elementwise = kernels(FUSIONS)[0]
    assert elementwise == Kernel("memory", 0.0, "", 3 * 16 * 64 * 4, (16 * 64, 0, 16 * 64))  # add; -; exp


def test_a_fusion_reads_only_the_slice_of_an_operand_it_slices():
    weights = kernels(FUSIONS)[1]
    assert weights.bytes == 64 * 64 * 4 + 4 + 64 * 64 * 2  # one layer of the stack, the index, the result
    assert weights.vector == (0, 64 * 64, 0)  # the conversion


def test_a_fusion_updating_a_buffer_in_place_reads_and_writes_only_the_update():
    stored = kernels(FUSIONS)[2]
    assert stored.bytes == 16 * 64 * 4 + 4 + 16 * 64 * 4


def test_a_lone_instruction_is_a_kernel_and_a_gemm_fusion_a_matmul_of_its_dot():
    narrow, product = kernels(FUSIONS)[3:]
    assert (narrow.kind, narrow.bytes) == ("memory", 16 * 64 * (4 + 2))
    assert (product.kind, product.dtype, product.flops) == ("matmul", "bf16", 2 * 16 * 64 * 64)
    assert product.bytes == 2 * (16 * 64 + 64 * 64 + 16 * 64)


LOOP = """
%body.1 (p: (s32[], f32[1024])) -> (s32[], f32[1024]) {
  %p = (s32[], f32[1024]{0}) parameter(0)
  %v = f32[1024]{0} get-tuple-element(%p), index=1
  %copy.1 = f32[1024]{0} copy(%v)
  ROOT %t = (s32[], f32[1024]{0}) tuple(%i, %copy.1)
}
%cond.1 (p.1: (s32[], f32[1024])) -> pred[] {
  %p.1 = (s32[], f32[1024]{0}) parameter(0)
  ROOT %lt = pred[] compare(%i.1, %n), direction=LT
}
ENTRY %main (a: f32[1024]) -> f32[1024] {
  %a = f32[1024]{0} parameter(0)
  %t.0 = (s32[], f32[1024]{0}) tuple(%zero, %a)
  %w = (s32[], f32[1024]{0}) while(%t.0), condition=%cond.1, body=%body.1, backend_config={"known_trip_count":{"n":"24"}}
  ROOT %copy.2 = f32[1024]{0} copy(%a)
}
"""  # noqa: E501


def test_a_kernel_in_a_loop_body_runs_the_loops_known_trip_count_times():
    counts = sorted(k.count for k in kernels(LOOP) if k.bytes == 2 * 1024 * 4)
    assert counts == [1, 24]  # the entry's copy once, the body's 24 times


def test_a_kernel_in_a_loop_of_data_dependent_trips_runs_once_per_entry_or_the_trips_given():
    walk = LOOP.replace(', backend_config={"known_trip_count":{"n":"24"}}', "")
    assert sorted(k.count for k in kernels(walk) if k.bytes == 2 * 1024 * 4) == [1, 1]
    told = kernels(walk, trips=lambda line: 2.5 if "body=%body.1" in line else 7)
    assert sorted(k.count for k in told if k.bytes == 2 * 1024 * 4) == [1, 2.5]  # a mean over entries
    # the host reads the condition before each trip and once more to stop; not where the count is known
    assert [k.count for k in told if k.kind == "round_trip"] == [3.5]
    assert [k.count for k in kernels(walk) if k.kind == "round_trip"] == [2]
    assert not [k for k in kernels(LOOP) if k.kind == "round_trip"]


@pytest.mark.parametrize(
    "branches",
    ["true_computation=%body.1, false_computation=%other", "branch_computations={%other, %body.1}"],
    ids=["predicate", "index"],
)
def test_each_branch_of_a_conditional_counts_as_run_even_in_a_loop(branches):
    other = "%other (p: (s32[], f32[1024])) -> (s32[], f32[1024]) {\n  %copy.3 = f32[512]{0} copy(%v)\n}\n"
    branched = other + LOOP.replace("condition=%cond.1, body=%body.1", "condition=%cond.1, body=%looped")
    branched = branched.replace(
        "%body.1 (",
        "%looped (p: (s32[], f32[1024])) -> (s32[], f32[1024]) {\n"
        f"  %c = (s32[], f32[1024]) conditional(%p, %t, %t), {branches}\n}}\n%body.1 (",
    )
    copies = sorted((k.bytes, k.count) for k in kernels(branched) if k.bytes >= 512 * 4)
    # the other branch's copy (its operand not in view: its result), the entry's, the looped branch's
    assert copies == [(512 * 4, 24), (2 * 1024 * 4, 1), (2 * 1024 * 4, 24)]
    # the host reads the branch index at each of the loop's trips
    assert [k.count for k in kernels(branched) if k.kind == "round_trip"] == [24]
    # each branch's kernels marked with it: the true one first, an index's in their order
    looped, other = ("c/0", "c/1") if branches.startswith("true") else ("c/1", "c/0")
    marked = sorted((k.bytes, k.count, k.branch) for k in kernels(branched) if k.bytes >= 512 * 4)
    assert marked == [(512 * 4, 24, other), (2 * 1024 * 4, 1, ""), (2 * 1024 * 4, 24, looped)]


COLLECTIVES = """
ENTRY %main (a: bf16[64,128], b: f32[1024], c: f32[4096]) -> f32[1024] {
  %a = bf16[64,128]{1,0} parameter(0)
  %b = f32[1024]{0} parameter(1)
  %c = f32[4096]{0} parameter(2)
  %ag = (bf16[64,128]{1,0}, bf16[512,128]{1,0}) all-gather-start(%a), channel_id=1, replica_groups=mesh['data'=2,'model'=8] {'model'}, dimensions={0}
  %agd = bf16[512,128]{1,0} all-gather-done(%ag)
  %ar = f32[1024]{0} all-reduce-start(%b), channel_id=2, replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=%sum
  %ard = f32[1024]{0} all-reduce-done(%ar)
  ROOT %rs = f32[1024]{0} reduce-scatter(%c), channel_id=3, replica_groups=[2,4]<=[8], dimensions={0}, to_apply=%sum
}
"""  # noqa: E501


def test_an_async_collective_is_one_kernel_sending_its_ring_share_of_its_group():
    gather, reduce, scatter = kernels(COLLECTIVES)
    assert all(k.kind == "collective" and k.count == 1 for k in (gather, reduce, scatter))
    assert gather.bytes == 7 * 64 * 128 * 2  # its shard to each of the 7 others of the 'model' axis
    assert reduce.bytes == 2 * 3 * 1024 * 4 // 4  # ring all-reduce in groups of 4
    assert scatter.bytes == 3 * 4096 * 4 // 4  # 2 groups of 4


ATTENTION = """
ENTRY %main (q: bf16[2,128,4,64], k: bf16[2,128,2,64], v: bf16[2,128,2,64]) -> bf16[2,4,128,64] {
  %q = bf16[2,128,4,64]{3,2,1,0} parameter(0)
  %k = bf16[2,128,2,64]{3,2,1,0} parameter(1)
  %v = bf16[2,128,2,64]{3,2,1,0} parameter(2)
  %fwd = (bf16[2,4,128,64]{3,1,2,0}, f32[2,4,128]{2,1,0}, u8[0]{0}) custom-call(%q, %k, %v), custom_call_target="__cudnn$fmhaSoftmax", backend_config={"cudnn_fmha_backend_config": {"fmha_scale": 0.125, "intermediate_tensor_shape": {"element_type": "BF16", "dimensions": ["2", "4", "128", "128"], "tuple_shapes": []}, "is_flash_attention": true, "mask_type": "CAUSAL", "bmm1_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["3"]}}}
  %bwd = (bf16[2,128,4,64]{3,2,1,0}, bf16[2,128,2,64]{3,2,1,0}, bf16[2,128,2,64]{3,2,1,0}, u8[0]{0}) custom-call(%q, %k, %v), custom_call_target="__cudnn$fmhaSoftmaxBackward", backend_config={"cudnn_fmha_backend_config": {"intermediate_tensor_shape": {"element_type": "BF16", "dimensions": ["2", "4", "128", "128"], "tuple_shapes": []}, "mask_type": "NO_MASK", "bmm1_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["3"]}}}
  ROOT %out = bf16[2,4,128,64]{3,1,2,0} get-tuple-element(%fwd), index=0
}
"""  # noqa: E501


def test_fused_attention_computes_its_products_per_row_and_head_halved_under_a_causal_mask():
    forward, backward = kernels(ATTENTION)
    product = 2 * 2 * 4 * 128 * 128 * 64  # 2·B·H·Sq·Sk·D
    assert (forward.kind, forward.dtype, forward.flops) == ("attention", "bf16", 2 * product / 2)
    assert backward.flops == 5 * product  # no mask: every tile
    assert forward.bytes == 2 * 2 * 128 * 64 * (4 + 2 + 2) + 2 * (2 * 4 * 128 * 64) + 4 * 2 * 4 * 128


def test_a_summary_merges_identical_kernels_and_reads_back_as_the_same_work():
    found = kernels(LOOP) + kernels(FUSIONS)
    rows = summary(found)
    assert len(rows) < len(found)  # the two copies of 8 KiB, once 24 times and once, merge
    back = from_summary(rows)
    assert sum(k.count * k.bytes for k in back) == sum(k.count * k.bytes for k in found)
    assert sum(k.count * k.flops for k in back) == sum(k.count * k.flops for k in found)
    branched = [Kernel("memory", 0.0, "", 8, branch="c/1"), Kernel("memory", 0.0, "", 8)]
    assert sorted(from_summary(summary(branched)), key=lambda k: k.branch) == branched[::-1]
    assert len(summary(branched)[0]) == 6 and summary(branched)[1][6] == "c/1"  # unmarked rows as before


COMMAND_BUFFER = """
%command_buffer (p0: f32[256]) -> f32[256] {
  %p0 = f32[256]{0} parameter(0)
  ROOT %copy.3 = f32[256]{0} copy(%p0)
}
%sum (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add.9 = f32[] add(%x, %y)
}
ENTRY %main (a: f32[256]) -> f32[] {
  %a = f32[256]{0} parameter(0)
  %c = f32[256]{0} call(%a), to_apply=%command_buffer
  %zero = f32[] constant(0)
  ROOT %r = f32[] reduce(%c, %zero), dimensions={0}, to_apply=%sum
}
"""


def test_a_command_buffers_kernels_count_and_a_reducers_body_is_no_kernel():
    found = kernels(COMMAND_BUFFER)
    assert sorted((k.kind, k.bytes) for k in found) == [("memory", 256 * 4 + 4 + 4), ("memory", 2 * 256 * 4)]
