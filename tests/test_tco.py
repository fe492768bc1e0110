"""`gpuwise tco`: owning against renting, year by year."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog


def test_tco_separates_cash_out_from_resale_value(shipped: Catalog) -> None:
    """Issue 14: year 1 used to be net of resale, below the purchase price. Cash out is what has been paid by then
    (cards, host, energy, repairs); the resale value is reported beside it, and net = cash - resale."""
    from gpuwise.estimate.cost.report import Purchase, tco_report
    from gpuwise.estimate.cost.tco import Usage

    report = tco_report(shipped.gpus["h100-sxm-80gb"], shipped, Purchase(count=8), Usage())
    assert report.cash_by_year_usd[0] >= report.buy.capex_usd
    for cash, resale, net in zip(report.cash_by_year_usd, report.residual_by_year_usd, report.buy_by_year_usd,
                                 strict=True):
        assert net == pytest.approx(cash - resale)
