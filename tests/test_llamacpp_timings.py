"""llama-server 0.3.36's /completion timings, as its source computes them.

``n_gen_tps`` (tools/server/server-common.h) divides the generation steps, ``predicted_n - 1``,
by ``predicted_ms``: the first token comes from prefill. A response from the engine tests:
predicted_n 128, predicted_ms 1446.222, so predicted_per_second = 1000 x 127 / 1446.222 (87.815...).
"""

from __future__ import annotations

import orjson
import pytest

from fold.errors import RefusedError
from fold.inputs.oracles import read_oracle


def response(predicted_per_second: float) -> str:
    timings = {
        "cache_n": 0,
        "prompt_n": 17,
        "prompt_ms": 3.81,
        "prompt_per_token_ms": 0.22411764705882353,
        "prompt_per_second": 4461.942257217848,
        "predicted_n": 128,
        "predicted_ms": 1446.222,
        "predicted_per_token_ms": 11.387574803149606,
        "predicted_per_second": predicted_per_second,
        "draft_n": 229,
        "draft_n_accepted": 98,
    }
    return orjson.dumps({"id_slot": 1, "stop": True, "tokens_predicted": 128, "timings": timings})


def test_the_servers_own_speed_is_read():
    speed = 1000 * 127 / 1446.222
    arm = read_oracle("llamacpp", response(speed).decode())
    assert arm.output_throughput_tok_s == speed
    assert (arm.proposed, arm.accepted) == (229, 98)


def test_an_older_servers_speed_over_every_token_is_read_too():
    speed = 1000 * 128 / 1446.222
    assert read_oracle("llamacpp", response(speed).decode()).output_throughput_tok_s == speed


def test_a_speed_from_neither_count_is_refused_in_rounded_figures():
    with pytest.raises(RefusedError) as refused:
        read_oracle("llamacpp", response(90.0).decode())
    message = str(refused.value)
    assert "predicted_per_second = 90.0" in message
    # 127000 / 1446.222 = 87.81501042..., 128000 / 1446.222 = 88.50646719...: 8 digits shown
    assert "= 87.81501 and" in message and "= 88.506467:" in message
