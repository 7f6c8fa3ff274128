"""Generate the sample PDF ``docs/warranty-and-returns.pdf`` used by ``make demo``.

The document is fictional Lumen Labs support material written for the tether examples.
It uses only the core Helvetica font and plain ASCII text so that PDF text extraction is
clean, and a fixed creation date so that re-running the script produces identical bytes.

Usage::

    python examples/make_sample_pdf.py [OUTPUT_PATH]

Requires ``fpdf2`` (imported as ``fpdf``).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from fpdf import FPDF

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "docs" / "warranty-and-returns.pdf"
CREATION_DATE = datetime(2024, 3, 1, 9, 0, 0, tzinfo=UTC)

PAGES: list[tuple[str, list[str]]] = [
    (
        "1. Lumen S2 Limited Warranty",
        [
            "Lumen Labs warrants the Lumen S2 field sensor against defects in materials and "
            "workmanship for 2 years from the date of delivery to the original purchaser. The "
            "warranty covers the sensor body, the integrated solar panel, the electronics and the "
            "MB-2 mounting bracket. The SP-30 soil probe is covered for 1 year.",
            "If a covered part fails during the warranty period, we will repair the sensor or "
            "replace it with a new or refurbished unit of the same model, at our choice. A "
            "replacement unit is covered for the rest of the original warranty period or for 90 "
            "days, whichever is longer. Repairs under warranty are free of charge, including "
            "parts, labour and return shipping.",
            "The warranty does not cover damage caused by accidents, lightning, flooding above "
            "the IP66 rating, animals, incorrect installation, or use of non-genuine batteries "
            "and accessories. It also does not cover cosmetic wear such as scratches on the "
            "housing or normal fading of the solar panel frame. Opening the sealed electronics "
            "compartment, as opposed to the battery compartment, voids the warranty.",
            "To make a warranty claim, open the Lumen Field app and go to Help > Warranty claim, "
            "or email warranty@lumenlabs.example. Include the serial number (it starts with S2B), "
            "your order number or proof of purchase, a short description of the fault and any "
            "error codes shown in the app. We aim to answer every claim within 2 working days.",
        ],
    ),
    (
        "2. Battery Replacement Under Warranty",
        [
            "The LB-18 battery pack is a wear item, but we stand behind it. Battery replacement "
            "under warranty is available for 2 years from delivery if the battery health shown "
            "in the app under Device > Power drops below 60 percent during normal use. Batteries "
            "that simply lose capacity gradually above that threshold are working as designed.",
            "Before you file a battery claim, please rule out energy problems that look like a "
            "failing battery: a dirty or shaded solar panel, a panel tilt that is too flat for "
            "the season, or a reporting interval shorter than 15 minutes. A sensor that shows "
            "error E04 every night often has a perfectly healthy battery and a dirty panel.",
            "For an approved battery claim we ship a new LB-18 pack and a new back-cover gasket "
            "directly to you. You do not need to send the sensor in. Replace the pack yourself "
            "as described in the Battery and Power section of the User Guide, which takes about "
            "five minutes with a Torx T10 screwdriver. Please recycle the old pack at a local "
            "battery collection point; do not post lithium batteries back to us.",
            "Battery replacement under warranty does not apply to packs damaged by heat above "
            "60 degrees C, by physical impact, or by water entering through a pinched gasket. "
            "Third-party cells that trigger error E07 are never covered. Outside the warranty, "
            "replacement LB-18 packs are sold in the Lumen Labs web shop for 39 EUR.",
        ],
    ),
    (
        "3. Returns, Repairs and Return Shipping Labels",
        [
            "You may return an unused Lumen S2 within 30 days of delivery for a full refund. The "
            "sensor must be in its original packaging with all accessories and the Quick Start "
            "card. Sensors that have been installed in the field can be returned within 30 days "
            "for a refund minus a 15 percent restocking fee.",
            "To start a return or a warranty repair, request a Return Authorisation (RA) number in "
            "the app under Help > Returns, or from support. Every parcel must show its RA number "
            "on the outside. Parcels that arrive without an RA number may be refused and sent "
            "back to the sender.",
            "Return shipping labels are emailed together with the RA number as a PDF that you can "
            "print on A4 or letter paper. For warranty repairs and for faulty units returned "
            "within 30 days, the return shipping label is prepaid by Lumen Labs. For change of "
            "mind returns, the label cost of 9 EUR within the EU is deducted from the refund. "
            "A return shipping label is valid for 14 days; if it expires, ask support for a new "
            "one instead of paying postage yourself.",
            "Before shipping, remove the LB-18 battery from the sensor and keep it, unless support "
            "asks for it: lithium batteries cannot travel with our standard return labels. Pack "
            "the sensor in its original box or a sturdy carton with padding. Repairs normally "
            "take 5 to 10 working days from the day we receive the parcel, and you will receive "
            "an email with a tracking number when the repaired or replacement unit ships.",
        ],
    ),
]


def build_pdf() -> FPDF:
    """Lay out the three warranty pages and return the finished document."""
    pdf = FPDF(format="A4")
    pdf.set_title("Lumen S2 Warranty and Returns")
    pdf.set_author("Lumen Labs")
    pdf.set_subject("Warranty policy, battery replacement, returns and repair service")
    pdf.set_creator("tether examples/make_sample_pdf.py")
    pdf.set_creation_date(CREATION_DATE)
    pdf.set_margins(left=20, top=20, right=20)
    pdf.set_auto_page_break(auto=True, margin=20)
    for heading, paragraphs in PAGES:
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=16)
        pdf.multi_cell(0, 9, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)
        pdf.set_font("Helvetica", size=11)
        for paragraph in paragraphs:
            pdf.multi_cell(0, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    return pdf


def main(argv: list[str]) -> int:
    """Write the PDF to ``argv[1]`` if given, else to ``docs/`` next to this script."""
    output = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUTPUT
    output.parent.mkdir(parents=True, exist_ok=True)
    build_pdf().output(str(output))
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
