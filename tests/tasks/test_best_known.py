"""Best-known values (docs/best_known.md, issue 31 item 4): each value that a construction backs is
reached by that construction through the task's own verifier, the values that cannot be reached
say by how much, and the table in docs/best_known.md lists every shipped task with its task.yaml value."""

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize

from rewards import Evaluator
from tasks import load_task, shipped_tasks
from tasks.families.functions.verify import eggholder

DOC = Path(__file__).resolve().parents[2] / "docs" / "best_known.md"


def test_the_table_lists_every_task_with_its_value():
    rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in DOC.read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and not line.startswith("| task ")]  # \| inside a cell is no separator
    table = {cells[0].strip(): cells[-1].strip() for cells in rows if len(cells) == 6}
    assert sorted(table) == shipped_tasks()
    for name, value in table.items():
        assert float(value) == load_task(name).best_known, name


# What every best_known_source states (issue 53, item 1): the year of its source, and whether the value's
# construction was run through the task's verifier here (or why it was not).
CHECK_PHRASES = ("checked here", "not published", "not checkable here", "no construction shipped", "not a published value")


@pytest.mark.parametrize("name", shipped_tasks())
def test_every_best_known_source_gives_a_date_and_whether_it_was_checked_here(name):
    source = load_task(name).best_known_source
    assert re.search(r"\b20\d\d\b", source), f"{name}: no year in {source!r}"
    assert any(phrase in source for phrase in CHECK_PHRASES), f"{name}: says nothing of a check: {source!r}"


# ---- mstd_30: the exhaustive maximum -----------------------------------------------------------

BEST_MSTD = [0, 1, 2, 4, 5, 9, 12, 13, 17, 20, 21, 22, 24, 25]  # 51 sums, 47 differences


def bit_count(x: np.ndarray) -> np.ndarray:
    return np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1).astype(np.int64)


def ratios_of_every_set(n: int):
    """(|A+A|, |A-A|, masks) of every subset of [0, n) containing 0, by shifted ORs of bit masks:
    the method of docs/best_known.md, written independently of the verifier."""
    masks = (np.arange(2 ** (n - 1), dtype=np.uint64) << np.uint64(1)) | np.uint64(1)
    sums, diffs = np.zeros_like(masks), np.zeros_like(masks)
    for k in range(n):
        has = ((masks >> np.uint64(k)) & np.uint64(1)).astype(bool)
        sums[has] |= masks[has] << np.uint64(k)  # a + k for every a, k in A
        diffs[has] |= masks[has] >> np.uint64(k)  # a - k >= 0
    return bit_count(sums), 2 * bit_count(diffs) - 1, masks


@pytest.mark.parametrize("n, best, optima", [(14, (1, 1), None), (15, (26, 25), [[0, 2, 3, 4, 7, 11, 12, 14]]),
                                             (20, (35, 33), [[0, 1, 2, 4, 5, 9, 12, 13, 14, 16, 17]])])
def test_exhaustive_maxima_on_small_ranges_agree_with_the_verifier(n, best, optima):
    """No MSTD set fits in [0, 14); in [0, 15) only Conway's set and its reflection; the method
    that gives 51/47 at n = 30 (docs/best_known.md) reproduces these, and the verifier agrees."""
    mstd = load_task("mstd_30")
    sums, diffs, masks = ratios_of_every_set(n)
    top = sums * best[1] == diffs * best[0]
    assert not np.any(sums * best[1] > diffs * best[0]) and top.any()
    if optima is not None:
        found = sorted([k for k in range(n) if int(m) >> k & 1] for m in masks[top])
        reflected = [sorted(max(a) - x for x in a) for a in optima]
        assert found == sorted(optima + reflected)
        for a in found:
            assert mstd.verify(a).reward == best[0] / best[1]


def test_mstd_best_known_is_the_exhaustive_maximum_and_its_set_reaches_it():
    mstd = load_task("mstd_30")
    assert mstd.best_known == 51 / 47
    for a in (BEST_MSTD, [25 - x for x in BEST_MSTD], [29 - x for x in BEST_MSTD], [x + 4 for x in BEST_MSTD]):
        verdict = mstd.verify(sorted(a))
        assert verdict.valid and verdict.reward == mstd.best_known
        assert verdict.metrics["sums"] == 51 and verdict.metrics["differences"] == 47
    assert mstd.verify([0, 2, 3, 4, 7, 11, 12, 14]).reward == 1.04 < mstd.best_known  # the starter


def test_the_mstd_optimum_through_the_sandbox():
    mstd = load_task("mstd_30")
    result = Evaluator(mstd, workers=1, timeout_s=30).evaluate(f"def construct_set():\n    return {BEST_MSTD}\n")
    assert result.valid and result.reward == mstd.best_known == 51 / 47, result.feedback


# ---- autocorrelation_third: AlphaEvolve's construction for max |f*f| ----------------------------

# google-deepmind/alphaevolve_results, mathematical_results.ipynb, B.3 "C_3'" (max |f*f|), 150 steps.
ALPHAEVOLVE_SIGNED = [
    0.6223133182, 0.3965529362, 0.5155572827, 0.4026054689, 0.3435153294, 0.3473694931, 0.1726671659, 0.3115981044,
    0.1755502741, 0.1167055299, 0.1692645221, -0.0345584766, 0.0844364414, 0.0237112885, -0.0333696769, -0.1167063253,
    -0.0992276094, 0.1315623023, 0.0677990921, 0.1915308951, 0.2268110818, 0.2037620216, -0.1051674677, 0.0612687756,
    -0.0159353544, 0.1443888515, -0.0413677311, -0.0046231569, 0.0181296016, 0.1581756187, -0.0299984956, 0.073960671,
    0.0550292403, 0.1497004872, 0.1122868505, 0.0268226396, 0.0146040885, 0.0520545965, 0.0354593091, 0.0444695053,
    0.2039311987, 0.2034179524, 0.2082486178, 0.0961010058, 0.2216949705, 0.2455885615, 0.1275649544, 0.1550579189,
    0.1877411253, 0.080847527, 0.1635363594, -0.0862481201, 0.2347026533, -0.333930083, -0.239494448, -0.6335429902,
    -0.6536792389, 0.0540557528, 0.0476279139, 0.0575575387, 0.0832110951, 0.0622557902, 0.0471965671, 0.0720111005,
    0.092290808, 0.0673488538, 0.0542097051, 0.080061704, 0.117737021, 0.0585280483, 0.0735929104, 0.1157073367,
    0.1360314894, 0.0857232816, 0.1204024893, 0.1302030708, 0.1460587793, 0.0852150335, 0.1499055898, 0.1576606253,
    0.1742561886, 0.1496941309, 0.177311065, 0.1740530416, 0.225783558, 0.2151370133, 0.1261505929, 0.2156770155,
    0.2444869096, 0.1658996813, 0.0812677006, 0.0777573525, 0.0843057155, 0.3319153963, 0.3085644675, 0.3235926887,
    0.3825766929, 0.21562839, 0.2172300408, 0.1900463317, 0.2513589638, 0.1663648252, 0.0420563959, 0.2484866204,
    0.0170309701, 0.1050793648, 0.0144840833, 0.0559286295, -0.0438033627, -0.2310871624, 0.0176185856, 0.108309509,
    0.217251465, 0.3339027835, 0.1756580766, 0.0281903951, 0.0786703868, 0.0485526265, 0.105616528, 0.1561141581,
    -0.0699280355, 0.1110162697, 0.153952542, 0.1322776805, 0.0051064865, 0.1633810017, 0.1509218799, 0.2955311928,
    0.0429450318, 0.0858825241, 0.0273075747, 0.028981414, -0.0069017846, 0.1518862224, 0.2043842841, 0.1724630384,
    0.05525706, 0.1267528858, 0.2247116637, 0.0628715547, 0.1358115307, 0.0939520169, 0.030211589, 0.1357907296,
    0.0403400901, -0.1789162965, 0.0647361248, 0.3075374047, 0.4926213831, 0.9597669584,
]


def test_autocorrelation_best_known_is_alphaevolves_function_for_the_absolute_value():
    c3 = load_task("autocorrelation_third")
    verdict = c3.verify(ALPHAEVOLVE_SIGNED)
    assert verdict.valid and verdict.reward == pytest.approx(c3.best_known, abs=1e-10)
    assert verdict.metrics["C"] == pytest.approx(1.4687620697, abs=1e-10)
    conv = np.convolve(ALPHAEVOLVE_SIGNED, ALPHAEVOLVE_SIGNED)
    scale = 2 * len(ALPHAEVOLVE_SIGNED) / sum(ALPHAEVOLVE_SIGNED) ** 2
    # its largest |f*f| is the positive peak, so both constants (with and without |.|) give it 1.46876
    assert conv.max() * scale == pytest.approx(verdict.metrics["C"], rel=1e-12) and -conv.min() * scale < 1.4682
    assert c3.best_known < 1 / 1.4581  # the old value, a bound for the constant without |.|


# ---- function minimisation: what eq. 20 gives at the best known points --------------------------

def test_eggholder_cannot_reach_1_its_exact_minimum_scores_best_known():
    egg = load_task("eggholder")
    verdict = egg.verify([512.0, 404.2318051252468])
    assert verdict.valid and verdict.reward == pytest.approx(egg.best_known, abs=1e-15) and egg.best_known < 1
    assert verdict.metrics["f"] == pytest.approx(-959.6406627208, abs=1e-9)
    for start in ([512.0, 404.2319], [511.9, 404.0], [510.0, 405.0]):  # the minimum sits on the x1 = 512 edge
        polished = minimize(eggholder, start, bounds=[(-512, 512)] * 2, method="L-BFGS-B")
        assert polished.fun >= verdict.metrics["f"] - 1e-9
    grid = itertools.product(np.linspace(-512, 512, 401), repeat=2)  # no other basin comes close
    assert min(eggholder(np.array(p)) for p in grid) > -959.65


def test_mishra_bird_reaches_1_below_the_rounded_minimum():
    bird = load_task("mishra_bird")
    verdict = bird.verify([-3.1302468065028455, -1.5821421765839716])
    assert verdict.valid and verdict.metrics["f"] < -106.7645 and verdict.reward == 1.0 == bird.best_known


# Best points found here by SLSQP (docs/best_known.md, Keane's bump): 10-D and 20-D from random starts,
# 30-D from 12 coordinates near 3, one at 0.5 and 17 near 0.45 (product 0.75).
KEANE_10 = [3.123890374458221, 3.0691548742335777, 3.014282328589531, 2.957588359990595, 1.4660413724235428,
            0.3680585169246591, 0.3634823249350471, 0.35912064147936423, 0.35495427091382875, 0.3509666486533712]
KEANE_20 = [3.1624606330781653, 3.128331425576407, 3.094792137392304, 3.061450591905401, 3.0279291387950624,
            2.9938260818107993, 2.958668712895201, 2.921842279357899, 0.49482512716883537, 0.488357136556702,
            0.48231642807097214, 0.4766447296244101, 0.47129549993209324, 0.46623102077874584, 0.4614200596176961,
            0.45683662069262665, 0.45245876281671904, 0.44826761022349404, 0.4442469939724795, 0.44038287260899767]

KEANE_30 = [3.175806836104074, 3.1530263743789346, 3.1306333868146288, 3.108509938725846, 3.086548595215175,
            3.064647747123011, 3.042707450879908, 3.0206252272450675, 2.998292036252193, 2.975587040113148,
            2.952370999870008, 2.9284768315306686, 0.49664702663352694, 0.4926159949908773, 0.48874637716299146,
            0.48502461630800925, 0.48143886215267573, 0.4779787639765037, 0.47463515585653565, 0.4713998706614426,
            0.4682656522066855, 0.46522595366161273, 0.4622749355424816, 0.4594072294539948, 0.4566180292384033,
            0.45390289922718724, 0.4512578837586719, 0.44867921221647106, 0.44616353897093264, 0.44370776754158214]


def test_keane_10_best_point_is_above_the_rounded_minimum():
    task = load_task("keane_bump_10")
    verdict = task.verify(KEANE_10)
    assert verdict.valid and verdict.metrics["f"] == pytest.approx(-0.7473103615261, abs=1e-12)
    assert verdict.reward == pytest.approx(task.best_known, abs=1e-15) and task.best_known < 1


def test_keane_20_best_point_is_below_the_rounded_minimum():
    task = load_task("keane_bump_20")
    verdict = task.verify(KEANE_20)
    assert verdict.valid and verdict.metrics["f"] < -0.803619104 and verdict.reward == 1.0 == task.best_known


# ---- spherical_code_30: Hardin and Sloane's angle, reproduced ---------------------------------

TAMMES_30 = [  # one random start, energy descent, then SLSQP on the minimum distance
    [0.2423648674339261, 0.9106458587927891, 0.33463919510015405],
    [-0.7595906009935435, 0.6016855752968742, 0.2469748719241232],
    [-0.6700706867802004, 0.15504324875311468, 0.7259248347687179],
    [0.3391075009652109, 0.45953245960788486, 0.8208751557672197],
    [-0.48677494618978706, -0.5451984519600619, -0.6825018679405077],
    [0.993316652122467, 0.02929697552434987, -0.1116410132582984],
    [-0.9852755977522597, -0.01482721791276296, 0.17032953379521357],
    [-0.26908525003468414, 0.6787684027218334, 0.6832763596673184],
    [-0.80222934025935, -0.5880227496605986, -0.10323435236701532],
    [-0.6927824796824107, -0.47866238034689773, 0.5393836867070898],
    [0.6012925217838163, -0.7525937419600802, -0.26842124135280887],
    [0.8407315322752404, 0.15205840165371326, 0.5196621336259208],
    [-0.32642271145622775, -0.9210644337954985, 0.212340580771887],
    [0.3256617139547442, -0.8910543927377061, 0.3161748207035092],
    [-0.09200420901462503, -0.6400740927683043, 0.7627846231344897],
    [0.2624867558738182, 0.14159519303447257, -0.9544901803058893],
    [0.7756449990608699, 0.627772250183633, 0.06539753306693778],
    [-0.6956132245815391, 0.5828650416674627, -0.4199887915043213],
    [0.833518132890211, -0.4686540823957691, 0.2925933580876301],
    [-0.02727603834690272, -0.9257898249457054, -0.37705333543027886],
    [-0.3930468064411061, 0.06557040070574681, -0.9171775894000765],
    [-0.8755443881165269, -0.050268075335502475, -0.48051549927106485],
    [-0.12731801681909957, 0.6476001245088651, -0.7512683950023148],
    [0.3113265707776959, 0.8938991534190719, -0.32252142540375073],
    [-0.28984541297218436, 0.9555052930675744, -0.05476560507136574],
    [0.7199796833000188, -0.2296682946948988, -0.6548906244917099],
    [0.4756419378343336, -0.30707271856044355, 0.8243003654549103],
    [0.15067381765889706, -0.5017169851970044, -0.8518083513542951],
    [0.7113257665106835, 0.4244431222122762, -0.5602353879439279],
    [-0.09019274300148722, -0.011614058878425398, 0.9958566075225068],
]


def test_spherical_code_best_known_is_reproduced_to_1e_15():
    task = load_task("spherical_code_30")
    verdict = task.verify(TAMMES_30)
    assert verdict.valid and verdict.reward == pytest.approx(task.best_known, abs=2e-15)
    assert math.degrees(task.best_known) == pytest.approx(38.5971, abs=5e-5)
    assert math.cos(task.best_known) == pytest.approx(0.7815518750949873, abs=1e-15)


def test_keane_30_has_points_well_below_the_published_minimum():
    """HELIX's f* for 30-D is not the minimum: the cap is reached 0.0019 below it (docs/best_known.md)."""
    task = load_task("keane_bump_30")
    verdict = task.verify(KEANE_30)
    assert verdict.valid and verdict.metrics["f"] == pytest.approx(-0.8199345197, abs=1e-10)
    assert math.prod(KEANE_30) >= 0.75 and sum(KEANE_30) <= 225 and 0 < min(KEANE_30) and max(KEANE_30) <= 10
    assert verdict.reward == 1.0 == task.best_known
