"""Colour and contrast: the role colours and the origin view's two span colours stay apart under
simulated colour-vision deficiency, and role is drawn by shape as well as colour.

Simulation: Machado, Oliveira & Fernandes (2009) matrices at full severity, applied in linear
sRGB; distance: CIE76 Delta E in CIELAB. Small marks (DAG markers) are told apart mostly by
lightness, so role colours must also differ in lightness under every simulation.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rollout_graph.core.roles import ROLES
from rollout_graph.ui.builders.dag import SYMBOL_CODES
from rollout_graph.ui.builders.palette import (
    CONTEXT_BACKGROUND,
    ORIGIN_BACKGROUND,
    ROLE_COLORS,
    ROLE_PATTERNS,
    role_symbol,
)

MACHADO = {
    "normal": np.eye(3),
    "protanopia": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
    "deuteranopia": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
    "tritanopia": np.array(
        [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]
    ),
}
SRGB_TO_XYZ = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
WHITE = np.array([0.95047, 1.0, 1.08883])

MIN_DELTA_E = 20.0  # clearly different, not merely "just noticeable" (~2.3)
MIN_ROLE_LIGHTNESS_GAP = 15.0


def linear(hex_color: str) -> np.ndarray:
    c = np.array([int(hex_color[i : i + 2], 16) for i in (1, 3, 5)]) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def lab(rgb_linear: np.ndarray) -> np.ndarray:
    xyz = SRGB_TO_XYZ @ np.clip(rgb_linear, 0, 1) / WHITE
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def seen(hex_color: str, vision: str) -> np.ndarray:
    return lab(MACHADO[vision] @ linear(hex_color))


def test_the_simulation_catches_a_red_green_confusion():
    # a pure red and a green of similar lightness nearly merge for a deuteranope: the check can fail
    red, green = "#d62728", "#7f7f00"
    assert np.linalg.norm(seen(red, "normal") - seen(green, "normal")) > 40
    assert np.linalg.norm(seen(red, "deuteranopia") - seen(green, "deuteranopia")) < MIN_DELTA_E
    # and the palette this issue replaced: amber and grey had nearly the same lightness
    assert abs(seen("#d97706", "deuteranopia")[0] - seen("#9ca3af", "deuteranopia")[0]) < MIN_ROLE_LIGHTNESS_GAP


@pytest.mark.parametrize("vision", list(MACHADO))
def test_role_colours_stay_apart(vision):
    for a, b in itertools.combinations(ROLES, 2):
        la, lb = seen(ROLE_COLORS[a], vision), seen(ROLE_COLORS[b], vision)
        assert np.linalg.norm(la - lb) >= MIN_DELTA_E, (vision, a, b)
        assert abs(la[0] - lb[0]) >= MIN_ROLE_LIGHTNESS_GAP, (vision, a, b)


@pytest.mark.parametrize("vision", list(MACHADO))
def test_origin_view_spans_stay_apart(vision):
    delta = np.linalg.norm(seen(CONTEXT_BACKGROUND, vision) - seen(ORIGIN_BACKGROUND, vision))
    assert delta >= MIN_DELTA_E, vision


def test_role_is_shape_too():
    for kind, code in SYMBOL_CODES.items():
        symbols = {role_symbol(code, role) for role in ROLES}
        assert len(symbols) == len(ROLES), kind  # every role its own marker variant, whatever the kind
    assert len(set(ROLE_PATTERNS.values())) == len(ROLES)  # and its own bar pattern in the timeline
