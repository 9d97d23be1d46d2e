"""``mindcluster.faults`` and ``mindcluster.reset_json``: one owner for the fault spellings and the
``reset.json`` format, used alike by the product and the simulator.

Paths are in Ascend/mind-cluster ``component/``.
"""

from __future__ import annotations

import json

from apps.policies.validation.platform import KNOWN_FAULT_LEVELS
from mindcluster import clusterd, reset_json
from mindcluster import faults as vocab
from simcluster.injector import FAULT_DEFAULTS, KNOWN_LEVELS


def test_wire_fault_types_clusterd_const_go_204_209() -> None:
    assert (vocab.FAULT_UCE, vocab.FAULT_OTHER, vocab.FAULT_HCCL) == ("0", "1", "2")


def test_every_chip_level_has_a_reset_policy_and_every_policy_reads_back_to_a_level_of_it() -> None:
    assert set(vocab.POLICY_OF_LEVEL) == {"", *vocab.CHIP_LEVELS}
    for policy, level in vocab.LEVEL_OF_POLICY.items():
        assert vocab.POLICY_OF_LEVEL[level] == policy
    assert set(vocab.LEVEL_OF_POLICY) == set(vocab.POLICY_OF_LEVEL.values()) - {""}


def test_clusterd_health_classes_partition_the_levels_it_acts_on() -> None:
    classified = clusterd.IN_PLACE_LEVELS | clusterd.UNHEALTHY_LEVELS | clusterd.SUB_HEALTHY_LEVELS
    assert classified <= set(vocab.CHIP_LEVELS)
    assert not clusterd.IN_PLACE_LEVELS & clusterd.UNHEALTHY_LEVELS


def test_product_and_simulator_read_the_same_levels_and_codes() -> None:
    assert KNOWN_LEVELS == vocab.CHIP_LEVELS
    assert set(vocab.CHIP_LEVELS) < set(KNOWN_FAULT_LEVELS) == set(vocab.REPORTED_LEVELS)
    # Switch levels (clusterd const.go:263-272) and health states (const.go:84-88) are reported too.
    assert {"NotHandle", "PreSeparate", "Separate", "Healthy", "SubHealthy", "UnHealthy"} <= set(
        KNOWN_FAULT_LEVELS
    )
    assert FAULT_DEFAULTS["uce"][1] == vocab.CODE_HBM_DOUBLE_BIT == "80E01801"
    assert FAULT_DEFAULTS["hccl"][1] == vocab.CODE_HCCL_RETRY == "8C1F860B"
    assert all(level in ("", *vocab.CHIP_LEVELS) for _, _, level, _ in FAULT_DEFAULTS.values())


def test_rank_entry_has_the_fields_of_go_task_dev_info_clusterd_domain_common_type_go_16_39() -> None:
    entry = reset_json.rank_entry(3, 1, reset_json.STATUS_UNRECOVERED, vocab.POLICY_RESTART, "80E01801")
    assert entry == {
        "RankId": 3,
        "LogicId": 1,
        "Status": "unrecovered",
        "Policy": "restart",
        "InitialPolicy": "restart",
        "ErrorCode": [0x80E01801],
        "ErrorCodeHex": "80E01801",
    }
    assert reset_json.rank_entry(0, 0, reset_json.STATUS_FAULT, "", "")["ErrorCode"] is None


def test_parse_never_raises_and_reads_ranks_written_as_numbers_or_digits() -> None:
    for bad in (None, "", "{not json", "[1, 2]", "null", 7):
        assert reset_json.parse(bad) == {}
    assert reset_json.parse_configmap_data(None) == {}
    doc = reset_json.parse(
        json.dumps(
            {
                "RankList": [
                    {"RankId": 3},
                    {"RankId": "4", "InitialPolicy": "isolate"},
                    "junk",
                    {"RankId": "x"},
                ]
            }
        )
    )
    entries = reset_json.rank_entries(doc)
    assert [reset_json.rank_id(e) for e in entries] == [3, 4, None]
    assert reset_json.policy(entries[1]) == "isolate"
    assert reset_json.rank_entries({"RankList": "nope"}) == []


def test_configmap_name_clusterd_const_go_97_101() -> None:
    assert reset_json.configmap_name("llama") == "reset-config-llama"
    assert reset_json.job_name_of("reset-config-llama") == "llama"
    assert reset_json.job_name_of("reset-config-") is None
    assert reset_json.job_name_of("other") is None
    assert (reset_json.DATA_KEY, reset_json.CHECK_CODE_KEY) == ("reset.json", "checkCode")
