"""Device-private formats: ``torch_npu.npu_format_cast`` to every format torch_npu's own test
helpers ask for (``torch_npu.testing.common_utils.create_common_tensor``: a NumPy array, on
the device, cast to the case's format), read back with ``.cpu()``, with
``torch.npu.config.allow_internal_format`` off (the default: the cast is a copy) and on (the
tensor is stored in the private format: CANN's old ``Identity`` operator converts it, and
converts it back for ``.cpu()``); an all-reduce of a cast tensor; and an operator torch_npu
sends to the old path for a tensor in a private format, refused by name."""

import numpy as np
import pytest
import torch
import torch_npu

import braid_npu

# (aclFormat, shape) as torch_npu's operator tests list them: NCHW, ND, NC1HWC0 (4-D and
# padded from fewer dimensions), FRACTAL_Z, FRACTAL_NZ (2-D and batched), NCDHW, NDC1HWC0,
# FRACTAL_Z_3D.
CASES = [
    (0, (2, 3, 4, 5)),
    (2, (2, 3, 4, 5)),
    (3, (2, 19, 4, 5)),
    (3, (6, 20)),
    (4, (33, 20, 3, 3)),
    (29, (6, 20)),
    (29, (2, 3, 17, 33)),
    (30, (1, 2, 3, 4, 5)),
    (32, (2, 17, 3, 4, 5)),
    (33, (17, 9, 2, 3, 3)),
]
NAMES = {0: "NCHW", 2: "ND", 3: "NC1HWC0", 4: "FRACTAL_Z", 29: "FRACTAL_NZ", 30: "NCDHW",
         32: "NDC1HWC0", 33: "FRACTAL_Z_3D"}


def base_format(fmt, shape):
    """The format a cast to ``fmt`` stores while internal formats are not allowed: a base
    format as asked, a private one as torch_npu's base format for the rank."""
    if fmt in (0, 2, 30):
        return fmt
    return {4: 0, 5: 30}.get(len(shape), 2)


def create_common_tensor(dtype, npu_format, shape):
    """What torch_npu's ``create_common_tensor([dtype, npu_format, shape], -5, 5)`` does."""
    values = np.random.uniform(-5, 5, shape).astype(dtype)
    cpu = torch.from_numpy(values)
    npu = torch.from_numpy(values).to("npu:0")
    if npu_format != -1:
        npu = torch_npu.npu_format_cast(npu, npu_format)
    return cpu, npu


@pytest.fixture
def internal_formats(request):
    """Sets ``allow_internal_format`` for the test, restoring the default (off) after it."""
    torch.npu.config.allow_internal_format = request.param
    yield request.param
    torch.npu.config.allow_internal_format = False


@pytest.mark.parametrize("internal_formats", [False, True], indirect=True,
                         ids=["base-formats", "internal-formats"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_every_format_cast_round_trips_through_cpu(internal_formats, dtype):
    # Device tensors stay out of the asserted expressions: pytest would print them, and
    # printing computes on the device.
    for fmt, shape in CASES:
        cpu, npu = create_common_tensor(dtype, fmt, shape)
        stored = NAMES[fmt] if internal_formats else NAMES[base_format(fmt, shape)]
        got, size = torch_npu.get_npu_format(npu).name, tuple(npu.shape)
        assert (got, size) == (stored, shape), fmt
        back = npu.cpu()
        assert torch.equal(back, cpu), (fmt, shape, dtype)
        # And back to the base format on the device, then to the host.
        base = torch_npu.npu_format_cast(npu, base_format(fmt, shape)).cpu()
        assert torch.equal(base, cpu), (fmt, shape, dtype)


@pytest.mark.parametrize("internal_formats", [True], indirect=True, ids=["internal-formats"])
def test_a_private_storage_has_torch_npu_s_blocked_size(internal_formats):
    # FRACTAL_NZ of a float16 [6, 20]: 2 column blocks of 16, 1 row block of 16 → 512
    # elements; NC1HWC0 of [2, 19, 4, 5]: C1 = 2 blocks of 16 → 2·2·4·5·16.
    _, nz = create_common_tensor(np.float16, 29, (6, 20))
    nz_bytes = nz.untyped_storage().nbytes()
    assert nz_bytes == 512 * 2
    _, five_d = create_common_tensor(np.float32, 3, (2, 19, 4, 5))
    five_d_bytes = five_d.untyped_storage().nbytes()
    assert five_d_bytes == 2 * 2 * 4 * 5 * 16 * 4


@pytest.mark.parametrize("internal", ["0", "1"], ids=["base-formats", "internal-formats"])
def test_an_all_reduce_of_a_format_cast_tensor(run_child, internal):
    # Two ranks as threads of one program: HCCL casts a tensor in a private format to its
    # base format, reduces it, and casts the sum back.
    proc = run_child(
        f"""
        import threading, torch, torch_npu
        import torch.distributed as dist
        from torch_npu._C._distributed_c10d import ProcessGroupHCCL
        world, store = 2, dist.HashStore()
        x = torch.arange(2 * 3 * 17 * 33, dtype=torch.float32).reshape(2, 3, 17, 33)
        results, errors = [None] * world, []
        def rank_main(rank):
            try:
                torch.npu.set_device(rank)
                torch.npu.config.allow_internal_format = {internal} == 1
                pg = ProcessGroupHCCL(dist.PrefixStore("formats", store), rank, world, ProcessGroupHCCL.Options())
                t = torch_npu.npu_format_cast((x + rank).npu(), 29)
                pg.allreduce([t]).wait()
                results[rank] = [torch_npu.get_npu_format(t).name, torch.equal(t.cpu(), 2 * x + 1)]
            except Exception as e:
                errors.append((rank, repr(e)))
        threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        braid_npu.result({{"errors": errors, "results": results}})
        """
    )
    done = braid_npu.child_result(proc)
    assert done["errors"] == []
    stored = "FRACTAL_NZ" if internal == "1" else "NCHW"
    assert done["results"] == [[stored, True]] * 2


def test_an_operator_on_a_private_format_is_refused_by_name(run_child):
    # torch_npu sends an operator whose input is stored in a private format to CANN's old
    # path (its aclnn operators take plain tensors): braid-acl-sim computes no such operator
    # and names it; the device then fails, as after any refused launch.
    proc = run_child(
        """
        import torch, torch_npu
        torch.npu.config.allow_internal_format = True
        y = torch_npu.npu_format_cast(torch.ones(6, 20).npu(), 29)
        try:
            (y + 1).cpu()
            braid_npu.result("computed")
        except RuntimeError as e:
            braid_npu.result(str(e))
        """
    )
    message = braid_npu.child_result(proc)
    assert "operator Add is not computed by braid-acl-sim" in message, message
    assert "dtype 0 FRACTAL_NZ [2, 1, 16, 16] of [6, 20]" in message, message
