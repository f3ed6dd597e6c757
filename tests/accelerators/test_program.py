"""Reading a compiled program: collectives and their bytes (within a slice and across slices),
fused attention calls, memory and the roofline, on program text in the compilers' own forms."""

import types

import pytest

from seqjax.accelerators import program, targets
from seqjax.accelerators.report import problems, roofline

HLO = """
  %all-reduce.1 = (f32[16,64]{1,0}, f32[16,64]{1,0}) all-reduce(%a, %b), channel_id=1, replica_groups={{0,1}}
  %all-gather-start.2 = (bf16[4,128]{1,0}, bf16[32,128]{1,0}) all-gather-start(%c), channel_id=2
  %all-gather-done.2 = bf16[32,128]{1,0} all-gather-done(%all-gather-start.2)
  %reduce-scatter.3 = f32[8]{0} reduce-scatter(%d), channel_id=3
  ROOT %cp = s32[2,2]{1,0} collective-permute(%e), source_target_pairs={{0,1}}
  %fmha = (bf16[2,4,128,64]{3,1,2,0}, u8[0]{0}) custom-call(%q, %k, %v), custom_call_target="__cudnn$fmhaSoftmax"
  %bwd = (bf16[2,4,128,64]{3,1,2,0}) custom-call(%q), custom_call_target="__cudnn$fmhaSoftmaxBackward"
  %splash_mqa_fwd.1 = (f32[8,128,128]{2,1,0}) custom-call(%x), custom_call_target="tpu_custom_call", x="y"
  %other_kernel.1 = (f32[8]{0}) custom-call(%x), custom_call_target="tpu_custom_call"
  %send.1 = (f32[16,4,64,64]{3,2,1,0}, u32[], token[]) send(%a, %t), channel_id=4, is_host_transfer=true, frontend_attributes={_xla_megascale_transfer_type="ALL_REDUCE"}
  %send.2 = (bf16[8]{0}, u32[], token[]) send(%a, %t), channel_id=5, is_host_transfer=true, frontend_attributes={_xla_megascale_transfer_type="ALL_GATHER"}
"""  # noqa: E501


def test_collectives_count_their_result_bytes_and_an_async_gather_its_output():
    assert program.collectives(HLO) == {
        "all-reduce": {"count": 1, "bytes": 2 * 16 * 64 * 4},
        "all-gather": {"count": 1, "bytes": 32 * 128 * 2},
        "reduce-scatter": {"count": 1, "bytes": 32},
        "collective-permute": {"count": 1, "bytes": 16},
    }


def test_sends_to_the_megascale_runtime_are_the_collectives_across_slices():
    assert program.dcn_collectives(HLO) == {
        "all-reduce": {"count": 1, "bytes": 16 * 4 * 64 * 64 * 4},
        "all-gather": {"count": 1, "bytes": 16},
    }


def test_a_collective_over_groups_of_one_device_moves_nothing_and_is_not_counted():
    alone = "  %psum.2 = f32[128,16]{1,0} all-reduce(%g), channel_id=2, replica_groups={{0},{1},{2},{3}}\n"
    assert program.collectives(HLO + alone) == program.collectives(HLO)


LOOP = """
%body.1 (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %all-gather.7 = f32[64]{0} all-gather(%x), channel_id=7
}
%cond.1 (p: (s32[], f32[8])) -> pred[] {
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
ENTRY %main (a: f32[8]) -> f32[8] {
  %w = (s32[], f32[8]) while(%t), condition=%cond.1, body=%body.1, backend_config={"known_trip_count":{"n":"24"}}
  %all-reduce.1 = f32[8]{0} all-reduce(%a), channel_id=1
}
"""


def test_a_collective_in_a_loop_body_counts_once_per_trip():
    assert program.collectives(LOOP) == {
        "all-gather": {"count": 24, "bytes": 24 * 64 * 4},
        "all-reduce": {"count": 1, "bytes": 32},
    }


LOOP_LINE = next(line for line in LOOP.splitlines() if " while(" in line) + "\n"
WALK_LINE = "  %walk = (s32[], f32[8]) while(%t), condition=%cond.2, body=%body.2"
WALK = LOOP.replace("ENTRY %main (a: f32[8]) -> f32[8] {", "ENTRY %main (a: f32[8]) -> f32[8] {\n" + WALK_LINE)
WALK += """
%body.2 (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %all-gather.9 = f32[16]{0} all-gather(%y), channel_id=9
}
%cond.2 (p: (s32[], f32[8])) -> pred[] {
  ROOT %lt = pred[] compare(%i, %count), direction=LT
}
"""


def test_a_loop_whose_trip_count_depends_on_the_data_runs_once_per_entry_or_as_told_and_is_counted():
    assert program.data_dependent_loops(LOOP) == 0 and program.data_dependent_loops(WALK) == 1
    assert program.computations(WALK)["body.2"][1] == 1
    runs = program.computations(WALK, trips=lambda line: 3 if "body=%body.2" in line else 5)
    assert (runs["body.2"][1], runs["body.1"][1]) == (3, 24)  # a known trip count stays as known
    assert program.collectives(WALK)["all-gather"] == {"count": 25, "bytes": 24 * 64 * 4 + 16 * 4}


BRANCHED = (
    LOOP.split("ENTRY")[0]
    + "%outer (p: (s32[], f32[8])) -> (s32[], f32[8]) {\n"
    + LOOP_LINE
    + "}\n%other (p: (s32[], f32[8])) -> (s32[], f32[8]) {\n}\n"
    + "ENTRY %main (a: f32[8]) -> f32[8] {\n  %c = (s32[], f32[8]) conditional(%p, %t, %t), {}\n}\n"
)


@pytest.mark.parametrize(
    "branches",
    ["true_computation=%outer, false_computation=%other", "branch_computations={%other, %outer}"],
    ids=["predicate", "index"],
)
def test_a_loop_in_any_branch_of_a_conditional_runs_its_trip_count_per_run_of_the_branch(branches):
    hlo = BRANCHED.replace("{}", branches)
    runs = program.computations(hlo)
    assert (runs["outer"][1], runs["body.1"][1]) == (1, 24)
    assert program.collectives(hlo)["all-gather"] == {"count": 24, "bytes": 24 * 64 * 4}


def test_fused_attention_calls_are_cudnn_custom_calls_and_splash_pallas_kernels():
    assert program.fused_attention_calls(HLO) == {"cudnn": 2, "splash": 1}


def test_memory_peak_is_arguments_plus_unaliased_outputs_plus_temporaries():
    stats = types.SimpleNamespace(
        argument_size_in_bytes=100, output_size_in_bytes=90, alias_size_in_bytes=80, temp_size_in_bytes=7
    )
    compiled = types.SimpleNamespace(memory_analysis=lambda: stats)
    assert program.memory(compiled) == {"arguments": 100, "outputs": 90, "aliased": 80, "temporaries": 7, "peak": 117}


def test_roofline_takes_the_slower_of_compute_and_memory_and_adds_the_links():
    target = targets.parse_target("v5p:2x2x2", slices=2)  # 16 chips of 459 TFLOP/s, 2.765 TB/s
    chip = target.chip
    estimate = roofline(target, flops=16 * 459e12 * 0.5, bytes_moved=2.765e12 * 0.1, link_bytes=6e9, dcn_bytes=6.25e8)
    assert estimate["compute_seconds"] == pytest.approx(0.5)
    assert estimate["memory_seconds"] == pytest.approx(0.1)
    assert estimate["collective_seconds"] == pytest.approx(6e9 / chip.link_bandwidth + 6.25e8 / chip.dcn_bandwidth)
    assert estimate["step"] == pytest.approx(0.5 + estimate["collective_seconds"])


def report(fits=True, requested="cudnn", fused=4, fallback=None):
    return {
        "fits": fits,
        "per_device_bytes": {"peak": 3 * 2**30},
        "usable_memory_bytes": 2**30,
        "attention": {"requested": requested, "fused_calls": fused, "fallback": fallback},
    }


def test_a_run_that_does_not_fit_or_lacks_the_kernel_it_named_is_a_problem():
    assert problems(report()) == []
    assert problems(report(requested="auto", fused=0)) == []  # auto asks for nothing by name
    assert problems(report(fits=False)) == ["does not fit: 3.00 GiB per device against 1.00 GiB usable"]
    (missing,) = problems(report(fused=0, fallback="cuDNN takes no segment ids"))
    assert missing == "model.attention_kernel=cudnn is not the kernel compiled: cuDNN takes no segment ids"


# Asynchronous collectives as the GPU compiler writes them (h100:8): each a -start whose result
# holds its operands then its outputs (an all-reduce's only its outputs), and a -done. Combined
# gathers take several operands; a TPU layout holds parentheses and commas of its own.
ASYNC = """
  %all-gather-start = ((f32[128,512]{1,0}, bf16[64,256]{1,0}), (f32[1024,512]{1,0}, bf16[512,256]{1,0})) all-gather-start(%p.1, %p.2), channel_id=1, dimensions={0}
  %all-gather-done = (f32[1024,512]{1,0}, bf16[512,256]{1,0}) all-gather-done(%all-gather-start)
  %all-gather-start.1 = (bf16[4,128]{1,0:T(8,128)(2,1)}, bf16[32,128]{1,0:T(8,128)(2,1)}) all-gather-start(%c), channel_id=2
  %all-gather-done.1 = bf16[32,128]{1,0:T(8,128)(2,1)} all-gather-done(%all-gather-start.1)
  %all-reduce-start = f32[655360]{0} all-reduce-start(%wrapped_concatenate), channel_id=3, to_apply=%add.clone
  %all-reduce-done = f32[655360]{0} all-reduce-done(%all-reduce-start)
  %all-reduce-start.1 = (f32[16]{0}, bf16[8]{0}) all-reduce-start(%a, %b), channel_id=4, to_apply=%add.clone
  %all-reduce-done.1 = (f32[16]{0}, bf16[8]{0}) all-reduce-done(%all-reduce-start.1)
  %collective-permute-start = (f32[8,128]{1,0}, f32[8,128]{1,0}) collective-permute-start(%p.2), channel_id=5, source_target_pairs={{0,1},{1,0}}
  %collective-permute-done = f32[8,128]{1,0} collective-permute-done(%collective-permute-start)
  %collective-permute-start.1 = (s32[4]{0}, s32[4]{0}, u32[], u32[]) collective-permute-start(%q), channel_id=6, source_target_pairs={{0,1},{1,0}}
  %collective-permute-done.1 = s32[4]{0} collective-permute-done(%collective-permute-start.1)
  %reduce-scatter-start = ((bf16[64,64]{1,0}), bf16[8,64]{1,0}) reduce-scatter-start(%p.3), channel_id=7, dimensions={0}, to_apply=%region_0.0
  %reduce-scatter-done = bf16[8,64]{1,0} reduce-scatter-done(%reduce-scatter-start)
  %all-to-all-start = ((bf16[64,64]{1,0}), bf16[64,64]{1,0}) all-to-all-start(%p.3), channel_id=8, dimensions={0}
  %all-to-all-done = bf16[64,64]{1,0} all-to-all-done(%all-to-all-start)
"""  # noqa: E501


def test_an_asynchronous_collective_counts_once_with_the_bytes_of_its_outputs():
    assert program.collectives(ASYNC) == {
        "all-gather": {"count": 2, "bytes": (1024 * 512 * 4 + 512 * 256 * 2) + 32 * 128 * 2},
        "all-reduce": {"count": 2, "bytes": 655360 * 4 + (16 * 4 + 8 * 2)},
        "collective-permute": {"count": 2, "bytes": 8 * 128 * 4 + 4 * 4},
        "reduce-scatter": {"count": 1, "bytes": 8 * 64 * 2},
        "all-to-all": {"count": 1, "bytes": 64 * 64 * 2},
    }


def test_an_asynchronous_collective_counts_what_its_synchronous_form_counts():
    """The same gather written synchronously (the result its outputs alone) and asynchronously."""
    synchronous = "  %ag = (f32[1024,512]{1,0}, bf16[512,256]{1,0}) all-gather(%p.1, %p.2), channel_id=1\n"
    start_and_done = "\n".join(ASYNC.strip("\n").splitlines()[:2])
    assert program.collectives(synchronous) == program.collectives(start_and_done)


# Fused attention kernels under the names the compilers give them: the splash kernel's three
# (forward, dkv, dq) and the Pallas flash kernel's three on a TPU (compiled for v5e), cuDNN's
# variants on a GPU; beside them a Pallas kernel of another kind, a cuDNN convolution and a
# fusion whose metadata names the splash kernel, none of them fused attention.
KERNELS = """
  %splash_mqa_fwd_segmented_residuals.1 = (f32[2,128,128]{2,1,0:T(8,128)}) custom-call(%a), custom_call_target="tpu_custom_call", operand_layout_constraints={}
  %splash_mqa_dkv_segmented_no_residuals.1 = (bf16[2,256,128]{2,1,0}) custom-call(%a), custom_call_target="tpu_custom_call"
  %splash_mqa_dq_segmented_no_residuals.1 = (bf16[2,1,256,128]{3,2,1,0}) custom-call(%a), custom_call_target="tpu_custom_call"
  %jvp_jit_flash_attention__.1 = (bf16[4,2,256,128]{3,2,1,0}) custom-call(%q), custom_call_target="tpu_custom_call"
  %flash_mha_bwd_dkv_block_q_major_128_block_q_128_block_k_major_128_block_k_128.1 = (bf16[4,2,256,128]{3,2,1,0}) custom-call(%q), custom_call_target="tpu_custom_call"
  %flash_mha_bwd_dq_block_q_major_128_block_k_major_128_block_k_128.1 = (bf16[4,2,256,128]{3,2,1,0}) custom-call(%q), custom_call_target="tpu_custom_call"
  %gmm.3 = (bf16[512,128]{1,0}) custom-call(%x), custom_call_target="tpu_custom_call"
  %fusion.2 = bf16[2,256,128]{2,1,0} fusion(%a), kind=kLoop, calls=%fused, metadata={op_name="jit(loss)/splash_mqa_fwd/pallas_call"}
  %fmha.1 = (bf16[2,4,128,64]{3,1,2,0}, u8[0]{0}) custom-call(%q, %k, %v, %bias), custom_call_target="__cudnn$fmhaScaleBiasSoftmax"
  %fmha.2 = (bf16[2,4,128,64]{3,1,2,0}, u8[0]{0}) custom-call(%q, %k, %v), custom_call_target="__cudnn$fmhaSoftmaxDropoutBackward"
  %conv.1 = (f32[8,16]{1,0}, u8[0]{0}) custom-call(%x, %w), custom_call_target="__cudnn$convForward"
"""  # noqa: E501


def test_every_fused_attention_kernel_counts_by_its_name_and_no_other_kernel_does():
    assert program.fused_attention_calls(KERNELS) == {"cudnn": 2, "splash": 6}
