"""The boot-log parser against logs in sglang 0.5.23's exact line formats."""

from __future__ import annotations

import pytest

from flashfleet.sizing import KvPool, MambaCap, SizingError, read_boot_log
from flashfleet.sizing.bootlog import GIB, clean_line, rank_of
from tests.sizing.sizing_logs import KV_LINE, MAMBA_LINE, MHA_NO_DTYPE, SPECULATIVE, WORKED_EXAMPLE


def test_worked_example_log_gives_the_skill_figures() -> None:
    log = read_boot_log(WORKED_EXAMPLE.read_text())
    assert log.mamba.max_mamba_cache_size == 257
    assert log.mamba.conv_state_gib == 0.46
    assert log.mamba.ssm_state_gib == 13.04
    assert not log.mamba.speculative
    assert log.kv == KvPool(tokens=1167552, kv_gib=15.03, dtype="torch.float8_e4m3fn", layout="mla")
    # (0.46 + 13.04) GiB / 257 = 56,402,781 bytes, i.e. "about 56.4 MB per slot"
    assert log.mamba.state_bytes_per_slot == pytest.approx(13.50 * 1024**3 / 257)
    assert round(log.mamba.state_bytes_per_slot / 1e6, 1) == 56.4
    # 15.03 GiB / 1167552 tokens = 13,822 bytes, i.e. "about 13.8 KB per token"
    assert round(log.kv.kv_bytes_per_token / 1e3, 1) == 13.8
    # 56,402,781 / 13,822.4 = 4080.5: "token_equiv about 4080"
    assert log.token_equiv == pytest.approx(4080.5, abs=0.5)
    assert log.ranks == tuple(f"TP{r}" for r in range(8))


def test_scheduler_line_and_capped_warning_are_read() -> None:
    log = read_boot_log(WORKED_EXAMPLE.read_text())
    assert log.scheduler is not None
    assert log.scheduler.max_total_num_tokens == 1167552
    assert log.scheduler.max_running_requests == 51
    assert log.scheduler.context_len == 202752
    assert log.capped == MambaCap(capped_to=51, max_mamba_cache_size=257, slots_per_request=5)
    # 257 slots // 5 per request = 51: the cap sglang printed
    assert log.mamba.max_mamba_cache_size // log.capped.slots_per_request == log.capped.capped_to


def test_capped_warning_in_plain_words() -> None:
    capped = read_boot_log(WORKED_EXAMPLE.read_text()).capped
    assert capped is not None
    text = capped.plain()
    assert "capped max_running_requests at 51" in text
    assert "KDA state pool" in text
    assert "257 slots" in text
    assert "needs 5" in text
    assert "--mamba-full-memory-ratio" in text


def test_speculative_line_with_ansi_dp_prefixes_and_draft_pool() -> None:
    log = read_boot_log(SPECULATIVE.read_text())
    assert log.mamba.speculative
    assert log.mamba.intermediate_ssm_gib == 11.26
    assert log.mamba.intermediate_conv_gib == 0.05
    assert log.mamba.state_gib == pytest.approx(0.32 + 9.13)
    assert log.mamba.total_gib == pytest.approx(0.32 + 9.13 + 11.26 + 0.05)
    # the target pool is the first KV line of each rank; the draft model's comes after it
    assert log.kv == KvPool(tokens=702464, kv_gib=19.63, dtype="torch.bfloat16", layout="mla")
    assert [p.kv_gib for p in log.other_kv_pools] == [1.23]
    assert log.ranks == ("DP0 TP0 EP0", "DP1 TP1 EP1", "DP2 TP2 EP2", "DP3 TP3 EP3")
    assert log.scheduler is not None
    assert log.scheduler.max_running_requests == 36
    assert log.capped is None
    # (9.45 / 180) GiB per slot over (19.63 / 702464) GiB per token
    assert log.token_equiv == pytest.approx((9.45 / 180) / (19.63 / 702464))


def test_mha_without_dtype_adds_k_and_v() -> None:
    log = read_boot_log(MHA_NO_DTYPE.read_text())
    assert log.kv.layout == "mha"
    assert log.kv.dtype is None
    assert log.kv.kv_gib == pytest.approx(136.36)
    # 136.36 GiB / 992896 tokens = 147,463 bytes per token
    assert log.kv.kv_bytes_per_token == pytest.approx(136.36 * GIB / 992896)
    assert round(log.kv.kv_bytes_per_token) == 147463
    assert log.scheduler is None
    assert log.ranks == ("TP0",)


def test_mha_with_dtype() -> None:
    kv = "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 992896, K size: 68.18 GB, V size: 68.18 GB"
    text = f"{MAMBA_LINE}\n{kv}\n"
    log = read_boot_log(text)
    assert log.kv == KvPool(tokens=992896, kv_gib=pytest.approx(136.36), dtype="torch.bfloat16", layout="mha")


def test_mla_without_dtype() -> None:
    log = read_boot_log(MAMBA_LINE + "\nKV Cache is allocated. #tokens: 1167552, KV size: 15.03 GB\n")
    assert log.kv == KvPool(tokens=1167552, kv_gib=15.03, dtype=None, layout="mla")


def test_labelled_pools_are_not_the_split_pool() -> None:
    text = "\n".join(
        [
            MAMBA_LINE,
            "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 5000, KV size: 0.50 GB",
            KV_LINE,
        ]
    )
    assert read_boot_log(text).kv.tokens == 1167552


def test_bare_lines_without_prefix_and_windows_line_ends() -> None:
    log = read_boot_log(f"{MAMBA_LINE}\r\n{KV_LINE}\r\n")
    assert log.kv.tokens == 1167552
    assert log.ranks == ()


def test_contradicting_ranks_are_an_error() -> None:
    text = "\n".join(
        [
            f"[2026-11-03 10:12:02 TP0] {MAMBA_LINE}",
            f"[2026-11-03 10:12:02 TP1] {MAMBA_LINE.replace('257', '300')}",
            f"[2026-11-03 10:12:03 TP0] {KV_LINE}",
            f"[2026-11-03 10:12:03 TP1] {KV_LINE}",
        ]
    )
    with pytest.raises(SizingError, match="ranks disagree on the Mamba Cache is allocated line"):
        read_boot_log(text)


def test_contradicting_kv_across_ranks_is_an_error() -> None:
    text = "\n".join(
        [
            f"[2026-11-03 10:12:02 TP0] {MAMBA_LINE}",
            f"[2026-11-03 10:12:03 TP0] {KV_LINE}",
            f"[2026-11-03 10:12:03 TP1] {KV_LINE.replace('15.03', '16.03')}",
        ]
    )
    with pytest.raises(SizingError, match=r"ranks disagree on the KV Cache.*TP0.*TP1"):
        read_boot_log(text)


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        (KV_LINE, "'Mamba Cache is allocated.'"),
        (MAMBA_LINE, "'KV Cache is allocated.'"),
        (
            "[2026-11-03 10:12:52] The server is fired up and ready to roll!",
            "'Mamba Cache is allocated.' or 'KV",
        ),
    ],
)
def test_missing_pool_lines_are_named(text: str, missing: str) -> None:
    with pytest.raises(SizingError, match=f"has no {missing}"):
        read_boot_log(text)


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        (MAMBA_LINE.replace("13.04GB", "1.3.04GB"), "ssm_state size"),
        (MAMBA_LINE.replace("0.46GB", "nanGB"), "conv_state size"),
        (MAMBA_LINE.replace("257", "two"), "max_mamba_cache_size"),
        (MAMBA_LINE.replace("257", "0"), "no slots"),
    ],
)
def test_unparseable_numbers_are_refused(bad: str, what: str) -> None:
    with pytest.raises(SizingError, match=what):
        read_boot_log(f"{bad}\n{KV_LINE}\n")


def test_zero_kv_tokens_refused() -> None:
    with pytest.raises(SizingError, match="#tokens: 0"):
        read_boot_log(f"{MAMBA_LINE}\n{KV_LINE.replace('1167552', '0')}\n")


def test_line_helpers() -> None:
    assert (
        clean_line("\x1b[1;33m[2026-11-03 10:12:03 TP3 EP3]\x1b[0m hello\r\n")
        == "[2026-11-03 10:12:03 TP3 EP3] hello"
    )
    assert rank_of("[2026-11-03 10:12:03.512 DP1 PP0 TP3 EP3] x") == "DP1 PP0 TP3 EP3"
    assert rank_of("[2026-11-03 10:12:03] x") == ""
