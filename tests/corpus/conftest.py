from pathlib import Path

import pytest

from agent.settings import Settings, load_settings


@pytest.fixture
def settings() -> Settings:
    return load_settings(
        environ={}, embedding__model="hash", chunking__chunk_chars=400, chunking__overlap_chars=50
    )


@pytest.fixture
def papers_dir(tmp_path: Path) -> Path:
    """Four small text 'papers' and one note that a directory scan should ignore."""
    d = tmp_path / "papers"
    d.mkdir()
    (d / "egfr.md").write_text(
        "# Osimertinib overcomes EGFR T790M resistance\n\n"
        "2017. Osimertinib is a third-generation EGFR tyrosine "
        "kinase inhibitor. It remains active against tumours carrying the T790M mutation, which confers "
        "resistance to gefitinib and erlotinib. " * 3
    )
    (d / "tp53.md").write_text(
        "# TP53 mutations in cancer\n\n2015. TP53 encodes the tumour suppressor p53. Loss of p53 function is "
        "the most common event in human cancer and impairs apoptosis after DNA damage. " * 3
    )
    (d / "crispr.txt").write_text(
        "CRISPR screens in 2021 identified genes required for T cell proliferation. Guide RNAs were "
        "delivered by lentivirus and enrichment was measured by sequencing. " * 3
    )
    (d / "malaria.txt").write_text(
        "Artemisinin resistance in Plasmodium falciparum, reported in 2019, is associated with kelch13 "
        "mutations that slow parasite clearance. " * 3
    )
    (d / "README.md").write_text("This folder holds test papers. doi:10.9999/readme")
    return d
