"""The bytes of asynchronous collectives combined by the GPU compiler: several operands gathered
or scattered by one `-start`, whose result holds the operands and then the outputs."""

from seqjax.accelerators import program

COMBINED = """
  %ag = ((bf16[8]{0}, f32[8,16]{1,0}), (bf16[64]{0}, f32[64,16]{1,0})) all-gather-start(%a, %b), channel_id=1, replica_groups=mesh['data'=8] {'data'}, dimensions={0}
  %agd = (bf16[64]{0}, f32[64,16]{1,0}) all-gather-done(%ag)
  %rs = ((f32[64]{0}, f32[64,16]{1,0}), (f32[8]{0}, f32[8,16]{1,0})) reduce-scatter-start(%c, %d), channel_id=2, replica_groups=mesh['data'=8] {'data'}, dimensions={0}, to_apply=%sum
  %rsd = (f32[8]{0}, f32[8,16]{1,0}) reduce-scatter-done(%rs)
  %cp = (f32[16,4]{1,0}, f32[16,4]{1,0}, u32[], u32[]) collective-permute-start(%e), channel_id=3, source_target_pairs={{0,1}}
"""  # noqa: E501


def test_a_combined_asynchronous_gather_or_scatter_counts_all_its_outputs_and_no_operand():
    assert program.collectives(COMBINED) == {
        "all-gather": {"count": 1, "bytes": 64 * 2 + 64 * 16 * 4},
        "reduce-scatter": {"count": 1, "bytes": 8 * 4 + 8 * 16 * 4},
        "collective-permute": {"count": 1, "bytes": 16 * 4 * 4},
    }
