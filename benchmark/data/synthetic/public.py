"""The public pre-training corpus: DocVQA-style documents of companies that are not PFL providers.

Purchase orders, receipts, delivery notes, forms, letters and English invoices of companies
whose trade words are disjoint from every PFL provider's. The real base model was trained on
SP-DocVQA, which holds invoices among other industry documents, in English; likewise the public
invoices here only carry English labels, so the clients' other languages, layouts and providers
are what federated fine-tuning has to learn. Their questions ask for document-specific values (numbers,
dates, amounts, identifiers, names) copied from the OCR text, which is what a model must learn
to read before federated fine-tuning. `public_document` builds one document from (seed, index)
alone, so a pre-training loop can stream fresh documents without touching the disk.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Iterator
from typing import Any

from benchmark.data.synthetic.document import SyntheticDocument
from benchmark.data.synthetic.identities import (
    PUBLIC_TRADES,
    Company,
    company_stem,
    make_company,
    person_name,
)
from benchmark.data.synthetic.invoice import (
    INVOICE_QUESTION_WEIGHTS,
    draw_template,
    render_invoice,
)
from benchmark.data.synthetic.locales import CLIENT_LOCALES, LOCALES, fill_digits
from benchmark.data.synthetic.page import PAGE_WIDTH, Page, draw_logo, encode_jpeg, text_width

KINDS = ("purchase_order", "receipt", "delivery_note", "form", "letter", "invoice")
ENGLISH_LOCALES = ("en_US", "en_GB")
INVOICE_ITEMS = (2, 6)
DOCUMENTS_PER_COMPANY = 4
MARGIN = 40
RIGHT = PAGE_WIDTH - MARGIN
PRODUCTS = (
    "Whole grain bread",
    "Croissant",
    "Espresso beans",
    "Garden hose",
    "Hammer drill",
    "Paper notebook",
    "Running shoes",
    "Dog food 5 kg",
    "Reading glasses",
    "Desk chair",
    "Sun lotion",
    "Tennis balls",
    "Screwdriver set",
    "Olive oil",
    "Green tea",
    "Wall paint",
    "Flower bouquet",
    "Bicycle lamp",
    "Winter jacket",
    "Cotton shirt",
    "Board game",
    "Guitar strings",
    "Vitamin tablets",
    "Toothpaste",
    "Rice 1 kg",
    "Tomato sauce",
    "Cheese board",
    "Wooden shelf",
    "Candle set",
    "Phone charger",
)
CARRIERS = ("DHL", "UPS", "FedEx", "DPD", "GLS", "PostNord", "TNT")
PLANS = ("Basic", "Silver", "Gold", "Premium", "Family", "Student")


def public_company(seed: int, company_index: int) -> Company:
    """The public-corpus company number `company_index` (never a PFL provider)."""
    rng = random.Random(f"{seed}:public-company:{company_index}")
    locale = rng.choice(CLIENT_LOCALES)
    return make_company(
        f"pub{company_index:06d}", (company_stem(rng), rng.choice(PUBLIC_TRADES)), locale, rng
    )


def public_document(
    seed: int, index: int, questions_per_page: tuple[int, int] = (3, 6)
) -> SyntheticDocument:
    """Lay out public document number `index` of the corpus drawn from `seed`, with its questions.

    Args:
        seed: corpus seed (the benchmark seed).
        index: document number; any non-negative integer gives a fresh, reproducible document.
        questions_per_page: inclusive range of the number of questions drawn.

    Returns:
        A one-page document (render its page with `document.pages[0].render()`).
    """
    company = public_company(seed, index // DOCUMENTS_PER_COMPANY)
    rng = random.Random(f"{seed}:public-document:{index}")
    kind = rng.choice(KINDS)
    if kind == "invoice":
        return _invoice(company, f"pubdoc{index:07d}", rng, questions_per_page)
    doc = SyntheticDocument(document_id=f"pubdoc{index:07d}", provider_id=company.provider_id)
    page = doc.new_page()
    _letterhead(doc, page, company, rng, kind)
    {
        "purchase_order": _purchase_order,
        "receipt": _receipt,
        "delivery_note": _delivery_note,
        "form": _form,
        "letter": _letter,
    }[kind](doc, page, company, rng)
    doc.draw_questions(
        rng,
        questions_per_page,
        {"company_name": 0.4, "company_phone": 0.4, "item_price": 0.4, "item_quantity": 0.4},
    )
    return doc


def _invoice(company: Company, document_id: str, rng: random.Random,
             questions_per_page: tuple[int, int]) -> SyntheticDocument:
    """A one-page English invoice of a public company, with the PFL invoices' questions."""
    english = dataclasses.replace(company, locale=rng.choice(ENGLISH_LOCALES))
    doc = render_invoice(english, draw_template(english, rng), document_id, rng, INVOICE_ITEMS,
                         0.0, INVOICE_ITEMS)
    doc.draw_questions(rng, questions_per_page, INVOICE_QUESTION_WEIGHTS)
    return doc


def public_records(
    seed: int,
    count: int,
    start: int = 0,
    *,
    images: bool = False,
    questions_per_page: tuple[int, int] = (3, 6),
) -> Iterator[dict[str, Any]]:
    """Stream public-corpus records (the imdb record fields) without writing anything.

    Args:
        seed: corpus seed.
        count: number of documents to generate.
        start: index of the first document (documents `start .. start + count - 1`).
        images: also render each page; the record then carries `image` (a PIL image).
        questions_per_page: inclusive range of the number of questions per document.

    Yields:
        One record per question, with `question`, `answers` (list with one string), `ocr_tokens`,
        `ocr_normalized_boxes`, `image_name`, `provider`, `document_id`, `question_type`.
    """
    for index in range(start, start + count):
        doc = public_document(seed, index, questions_per_page)
        rendered = [page.render() for page in doc.pages] if images else None
        yield from document_records(doc, rendered=rendered)


def document_records(
    doc: SyntheticDocument, rendered: list | None = None
) -> Iterator[dict[str, Any]]:
    """Records of a document's questions (image names `{document_id}_p{page}`)."""
    for qa in doc.qa:
        page = doc.pages[qa.page]
        record = {
            "question": qa.question,
            "answers": [qa.answer],
            "ocr_tokens": page.tokens(),
            "ocr_normalized_boxes": page.boxes(),
            "image_name": f"{doc.document_id}_p{qa.page + 1}",
            "provider": doc.provider_id,
            "document_id": doc.document_id,
            "question_type": qa.question_type,
        }
        if rendered is not None:
            record["image"] = rendered[qa.page]
        yield record


def render_jpegs(doc: SyntheticDocument) -> list[bytes]:
    """JPEG bytes of every page of a document."""
    return [encode_jpeg(page.render()) for page in doc.pages]


def _letterhead(
    doc: SyntheticDocument, page: Page, company: Company, rng: random.Random, kind: str
) -> None:
    """Logo, company name, address and phone at the top of the page."""
    centred = kind == "receipt"
    if centred:
        draw_logo(page, PAGE_WIDTH / 2 - 16, 30, 32, company.logo_style, company.colour)
        page.text(PAGE_WIDTH / 2, 70, company.name, 14, bold=True, align="center")
        for i, line in enumerate((company.street, company.city_line, f"Tel. {company.phone}")):
            page.text(PAGE_WIDTH / 2, 92 + i * 14, line, 10, align="center")
    else:
        draw_logo(page, MARGIN, 34, 38, company.logo_style, company.colour)
        page.text(MARGIN + 48, 36, company.name, 15, bold=True)
        page.text(
            MARGIN + 48, 58, f"{company.street} | {company.city_line} | Tel. {company.phone}", 9
        )
    doc.mark("company_name", company.name)
    doc.mark("company_phone", company.phone)


def _key_values(
    doc: SyntheticDocument,
    page: Page,
    x: float,
    y: float,
    rows: list[tuple[str, str, str]],
    size: int = 11,
) -> float:
    """Label/value rows; returns the y under the block."""
    width = max(text_width(label, size) for label, _, _ in rows) + 12
    for label, value, key in rows:
        page.text(x, y, label, size)
        page.text(x + width, y, value, size)
        doc.mark(key, value)
        y += size + 8
    return y


def _items(
    doc: SyntheticDocument,
    page: Page,
    rng: random.Random,
    y: float,
    locale,
    count: int,
    quantity_key: str | None,
) -> tuple[float, float]:
    """A small product table; returns (y under it, total amount)."""
    page.text(MARGIN, y, "Item", 11, bold=True)
    page.text(380, y, "Qty", 11, bold=True, align="right")
    page.text(RIGHT, y, "Amount", 11, bold=True, align="right")
    page.line(MARGIN, y + 17, RIGHT, y + 17)
    y += 24
    total = 0.0
    for name in rng.sample(PRODUCTS, count):
        quantity = rng.randint(1, 24)
        amount = round(quantity * rng.uniform(0.5, 120), 2)
        total += amount
        page.text(MARGIN, y, name, 11)
        page.text(380, y, str(quantity), 11, align="right")
        page.text(RIGHT, y, locale.format_amount(amount), 11, align="right")
        if quantity_key:
            doc.mark(quantity_key, str(quantity), item=name)
        doc.mark("item_price", locale.format_amount(amount), item=name)
        y += 19
    page.line(MARGIN, y, RIGHT, y)
    return y + 10, round(total, 2)


def _date(rng: random.Random, start_year: int = 2018, years: int = 7) -> dt.date:
    """A random date."""
    return dt.date(start_year, 1, 1) + dt.timedelta(days=rng.randrange(365 * years))


def _purchase_order(
    doc: SyntheticDocument, page: Page, company: Company, rng: random.Random
) -> None:
    """A purchase order sent by the company to a supplier."""
    locale = LOCALES[company.locale]
    ordered = _date(rng)
    page.text(MARGIN, 110, "PURCHASE ORDER", 20, bold=True, colour=company.colour)
    supplier = f"{company_stem(rng)} {rng.choice(('Wholesale', 'Distribution', 'Imports', 'Trading'))} {rng.choice(locale.legal_forms)}"
    rows = [
        (
            "PO Number:",
            fill_digits(rng.choice(("PO-######", "#######", "P@-#####")), rng),
            "po_number",
        ),
        ("Order Date:", locale.format_date(ordered), "order_date"),
        (
            "Delivery Date:",
            locale.format_date(ordered + dt.timedelta(days=rng.randint(3, 40))),
            "delivery_date",
        ),
        ("Supplier:", supplier, "supplier_name"),
        ("Contact:", person_name(rng), "contact_name"),
    ]
    y = _key_values(doc, page, MARGIN, 150, rows)
    y, total = _items(doc, page, rng, y + 20, locale, rng.randint(2, 8), "item_quantity")
    text = f"{locale.format_amount(total)} {locale.currency}"
    page.text(350, y + 6, "Order Total:", 12, bold=True)
    page.text(RIGHT, y + 6, text, 12, bold=True, align="right")
    doc.mark("total_amount", locale.format_amount(total))


def _receipt(doc: SyntheticDocument, page: Page, company: Company, rng: random.Random) -> None:
    """A till receipt in a narrow centred column."""
    locale = LOCALES[company.locale]
    left, right = 170, 430
    bought = _date(rng)
    rows = [
        (
            "Receipt No.",
            fill_digits(rng.choice(("####-###", "R########", "#####")), rng),
            "receipt_number",
        ),
        ("Date", locale.format_date(bought), "receipt_date"),
        ("Time", f"{rng.randint(7, 21):02d}:{rng.randint(0, 59):02d}", "receipt_time"),
        (
            "Cashier",
            rng.choice(("Anna", "Tom", "Lea", "Omar", "Ivy", "Raj", "Mia", "Nils")),
            "cashier",
        ),
    ]
    y = 150
    for label, value, key in rows:
        page.text(left, y, label, 10)
        page.text(right, y, value, 10, align="right")
        doc.mark(key, value)
        y += 16
    page.line(left, y + 2, right, y + 2)
    y += 10
    total = 0.0
    for name in rng.sample(PRODUCTS, rng.randint(2, 10)):
        price = round(rng.uniform(0.5, 60), 2)
        total += price
        page.text(left, y, name, 10)
        page.text(right, y, locale.format_amount(price), 10, align="right")
        doc.mark("item_price", locale.format_amount(price), item=name)
        y += 15
    page.line(left, y + 2, right, y + 2)
    rate = float(rng.choice(locale.tax_rates).rstrip("%"))
    tax = round(total * rate / (100 + rate), 2)
    for label, value, key, size in (
        ("TOTAL " + locale.currency, locale.format_amount(total), "total_amount", 12),
        ("incl. tax", locale.format_amount(tax), "tax_amount", 10),
    ):
        y += size + 8
        page.text(left, y, label, size, bold=size == 12)
        page.text(right, y, value, size, bold=size == 12, align="right")
        doc.mark(key, value)
    card = f"{rng.choice(('VISA', 'MASTERCARD', 'AMEX'))} **** {rng.randint(1000, 9999)}"
    page.text(left, y + 26, card, 10)
    doc.mark("card_number", card.split(" ", 1)[1])
    page.text(PAGE_WIDTH / 2, y + 50, "Thank you for shopping with us", 10, align="center")


def _delivery_note(
    doc: SyntheticDocument, page: Page, company: Company, rng: random.Random
) -> None:
    """A delivery note with shipment details."""
    locale = LOCALES[company.locale]
    page.text(MARGIN, 110, "DELIVERY NOTE", 20, bold=True, colour=company.colour)
    rows = [
        (
            "Delivery Note No.",
            fill_digits(rng.choice(("DN-#####", "LS######", "#########")), rng),
            "delivery_note_number",
        ),
        ("Delivery Date", locale.format_date(_date(rng)), "delivery_date"),
        ("Order No.", fill_digits(rng.choice(("SO-#####", "######")), rng), "po_number"),
        ("Carrier", rng.choice(CARRIERS), "carrier"),
        (
            "Tracking No.",
            fill_digits(rng.choice(("1Z###@@#########", "JJD##########", "##########")), rng),
            "tracking_number",
        ),
        ("Packages", str(rng.randint(1, 12)), "packages"),
        ("Total Weight", f"{rng.randint(1, 400)}.{rng.randint(0, 9)} kg", "weight"),
        ("Recipient", person_name(rng), "recipient_name"),
    ]
    y = _key_values(doc, page, MARGIN, 150, rows)
    _items(doc, page, rng, y + 20, locale, rng.randint(2, 7), "item_quantity")
    page.text(MARGIN, 770, "Received in good condition:", 10)
    page.line(200, 782, 380, 782)


def _form(doc: SyntheticDocument, page: Page, company: Company, rng: random.Random) -> None:
    """A filled-in application form with boxed fields."""
    locale = LOCALES[company.locale]
    page.text(
        MARGIN,
        110,
        rng.choice(("MEMBERSHIP APPLICATION", "REGISTRATION FORM", "CUSTOMER ENROLMENT")),
        18,
        bold=True,
        colour=company.colour,
    )
    name = person_name(rng)
    handle = name.lower().replace(" ", ".")
    rows = [
        ("Full name", name, "applicant_name"),
        ("Date of birth", locale.format_date(_date(rng, 1950, 50)), "date_of_birth"),
        (
            "Member No.",
            fill_digits(rng.choice(("M-######", "#########", "@@#####")), rng),
            "membership_number",
        ),
        (
            "E-mail",
            f"{handle}@{rng.choice(('mailbox', 'post', 'inbox'))}.{LOCALES[company.locale].tld}",
            "email",
        ),
        ("Phone", fill_digits(locale.phone_pattern, rng), "applicant_phone"),
        ("Start date", locale.format_date(_date(rng, 2022, 3)), "start_date"),
        ("Plan", rng.choice(PLANS), "plan"),
    ]
    y = 160
    for label, value, key in rows:
        page.text(MARGIN, y + 6, label, 10, colour=(90, 90, 90))
        page.rectangle((180, y, RIGHT, y + 26), outline=(150, 150, 160))
        page.text(188, y + 6, value, 12)
        doc.mark(key, value)
        y += 40
    page.text(MARGIN, y + 30, "Signature", 10)
    page.line(120, y + 42, 320, y + 42)


def _letter(doc: SyntheticDocument, page: Page, company: Company, rng: random.Random) -> None:
    """A business letter quoting a contract, a reference, an amount and a date."""
    locale = LOCALES[company.locale]
    recipient = person_name(rng)
    signer = person_name(rng)
    written = _date(rng)
    amount = locale.format_amount(round(rng.uniform(20, 20000), 2))
    contract = fill_digits(rng.choice(("##-#####", "K-######", "@@@/####")), rng)
    y = _key_values(
        doc,
        page,
        330,
        110,
        [
            ("Date:", locale.format_date(written), "letter_date"),
            ("Our ref:", fill_digits("@@-####/##", rng), "reference_number"),
        ],
        size=10,
    )
    page.text(MARGIN, 120, recipient, 11)
    doc.mark("recipient_name", recipient)
    city, postcode = rng.choice(locale.cities)
    page.text(
        MARGIN, 136, locale.city_pattern.format(city=city, postcode=fill_digits(postcode, rng)), 11
    )
    y = max(y, 170) + 20
    page.text(MARGIN, y, f"Subject: contract {contract}", 12, bold=True)
    doc.mark("contract_number", contract)
    paid = locale.format_date(written - dt.timedelta(days=rng.randint(2, 30)))
    body = (
        f"Dear {recipient.split()[0]}, thank you for your letter. We confirm that we received your payment of "
        f"{amount} {locale.currency} on {paid} for the contract named above. The contract remains valid under the "
        "agreed terms and no further action is needed from your side. Should you have any questions, our team "
        "will be happy to help you by phone or e-mail during our opening hours."
    )
    y = _paragraph(page, body, y + 30)
    doc.mark("amount", amount)
    doc.mark("payment_date", paid)
    page.text(MARGIN, y + 24, "Yours sincerely,", 11)
    page.text(MARGIN, y + 60, signer, 11)
    doc.mark("signer_name", signer)
    page.text(
        MARGIN,
        y + 76,
        rng.choice(("Customer Service", "Head of Accounts", "Managing Director")),
        10,
    )


def _paragraph(page: Page, text: str, y: float, size: int = 11) -> float:
    """Wrap `text` between the margins; returns the y under it."""
    line: list[str] = []
    for word in text.split():
        if line and text_width(" ".join([*line, word]), size) > RIGHT - MARGIN:
            page.text(MARGIN, y, " ".join(line), size)
            y += size + 6
            line = []
        line.append(word)
    if line:
        page.text(MARGIN, y, " ".join(line), size)
        y += size + 6
    return y
