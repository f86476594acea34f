"""The method configurations' one home (specbench.core.methods.configs): importable without
numpy, one label rule for every method, and one registry that names every method."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings

from specbench.core.methods.configs import (
    MEAN_WIDTHS,
    REGISTRY,
    As2dConfig,
    SdConfig,
    SpecAsrConfig,
    TargetConfig,
    method_name,
    parse_method_spec,
    sd_mean_label,
)
from specbench.errors import SpecbenchError
from tests.strategies import method_configs as configs


def test_the_configurations_import_and_parse_without_numpy():
    # numpy blocked: any import of it in the package, configs or what they import fails
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from specbench.core.methods.configs import parse_method_specs, row_fields\n"
            "configs = parse_method_specs(['target', 'sd:W=5..6,drafter=x', 'specasr', 'as2d:B=3,H=4'])\n"
            "print(' '.join(c.label for c in configs), row_fields(configs[1])['width'])\n"
            "assert 'numpy' not in {m.split('.')[0] for m, v in sys.modules.items() if v is not None}")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["target", "sd[W=5,drafter=x]", "sd[W=6,drafter=x]", "specasr[k_max=8,tau=0.5]",
                                   "as2d[B=3,H=4]", "5"]


@pytest.mark.parametrize("config,label", [
    (TargetConfig(), "target"),
    (SdConfig(5), "sd[W=5]"),
    (SdConfig(8, p_min=0.2, drafter="small"), "sd[W=8,p_min=0.2,drafter=small]"),
    (SpecAsrConfig(), "specasr[k_max=8,tau=0.5]"),  # k_max and tau show even at their defaults
    (SpecAsrConfig(k_max=4, tau=1.0, drafter="small"), "specasr[k_max=4,tau=1,drafter=small]"),
    (As2dConfig(), "as2d[B=7]"),  # B shows at its default, the others where they differ from theirs
    (As2dConfig(budget=3, drafter="gemma3", batch=4, conf_stop=0.25, align="positional", horizon=2),
     "as2d[B=3,drafter=gemma3,batch=4,conf_stop=0.25,align=positional,H=2]"),
])
def test_every_method_is_labelled_by_one_rule(config, label):
    assert config.label == label


def test_the_sd_mean_and_the_recycling_traces_are_labelled_by_the_same_rule():
    assert sd_mean_label() == f"sd[W={MEAN_WIDTHS}]" == "sd[W=5..8 mean]"
    assert sd_mean_label(0.2, "small") == "sd[W=5..8 mean,p_min=0.2,drafter=small]"
    assert SpecAsrConfig(k_max=4, tau=0.25, drafter="small").trace_label == "specasr[k_max=4,tau=0.25]"




@settings(max_examples=200, deadline=None)
@given(configs)
def test_a_label_is_the_spec_of_its_configuration(config):
    name, _, rest = config.label.partition("[")
    assert name == method_name(config)
    assert parse_method_spec(name + (":" + rest.removesuffix("]") if rest else "")) == [config]


def test_the_registry_names_every_method_once():
    assert tuple(REGISTRY) == ("target", "sd", "specasr", "as2d")
    assert [method_name(parse_method_spec(name)[0]) for name in REGISTRY] == list(REGISTRY)
    with pytest.raises(SpecbenchError) as error:
        parse_method_spec("sdd:W=5")
    assert str(error.value) == "Unknown method 'sdd'. Available: as2d, sd, specasr, target"
