"""Invoices of a PFL provider: a stable layout template per provider, varying content per document."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass

from benchmark.data.synthetic.document import SyntheticDocument
from benchmark.data.synthetic.identities import CUSTOMER_TRADES, Company, company_stem, person_name
from benchmark.data.synthetic.locales import ALTERNATIVE_DATE_FORMATS, LABELS, LOCALES, fill_digits
from benchmark.data.synthetic.page import PAGE_HEIGHT, PAGE_WIDTH, Page, draw_logo, text_width

# Line items are many per page: weigh them down so that key values and identity questions
# (what the DP track protects) make up most of the questions.
INVOICE_QUESTION_WEIGHTS = {
    "line_item_quantity": 0.2,
    "line_item_unit_price": 0.2,
    "line_item_amount": 0.3,
}

MARGIN = 40
RIGHT = PAGE_WIDTH - MARGIN
FOOTER_TOP = PAGE_HEIGHT - 78

CATALOGUE = (
    "Consulting hours",
    "Project management",
    "Software licence",
    "Annual support plan",
    "Server maintenance",
    "Network cabling",
    "Office chairs",
    "Desk lamps",
    "Printer toner",
    "Copy paper A4",
    "Freight charges",
    "Pallet transport",
    "Express delivery",
    "Installation service",
    "Travel expenses",
    "Training session",
    "Cloud storage 1 TB",
    "Data migration",
    "Security audit",
    "Cleaning service",
    "Window cleaning",
    "Catering lunch",
    "Coffee supplies",
    "Safety gloves",
    "Steel brackets",
    "Cable ties",
    "LED panels",
    "Circuit breakers",
    "Packaging boxes",
    "Bubble wrap",
    "Label printing",
    "Brochure design",
    "Web hosting",
    "Domain renewal",
    "Laptop repair",
    "Monitor 27 inch",
    "USB headsets",
    "Warehouse storage",
    "Forklift rental",
    "Site inspection",
    "Engineering drawings",
    "Concrete mix",
    "Scaffolding rental",
    "Paint white 10 L",
    "Lab analysis",
    "Sample testing",
    "Medical gloves",
    "Marketing campaign",
    "Photography",
    "Video editing",
    "Translation service",
    "Legal review",
    "Accounting service",
    "Payroll processing",
    "Maintenance visit",
    "Spare parts kit",
    "Hydraulic hose",
    "Filter cartridges",
    "Water dispensers",
    "Event staffing",
)


@dataclass(frozen=True)
class InvoiceTemplate:
    """A provider's stable invoice layout and wording."""

    labels: dict[str, str]
    colon: str
    header: str  # "logo_left" | "logo_right" | "centered"
    identity_in_header: bool
    meta_left: bool
    meta_keys: tuple[str, ...]
    body_size: int
    title_size: int
    name_size: int
    row_height: int
    band_table_header: bool
    currency_style: str  # "after_total" | "column" | "line"
    date_format: str
    invoice_number_pattern: str
    customer_number_pattern: str
    order_number_pattern: str
    due_days: int
    catalogue: tuple[tuple[str, float], ...]
    position_column: bool


def draw_template(company: Company, rng: random.Random) -> InvoiceTemplate:
    """Draw the layout template a provider uses for all of its invoices."""
    locale = LOCALES[company.locale]
    words = LABELS[locale.language]
    labels = {key: rng.choice(options) for key, options in words.items()}
    optional = [k for k in ("due_date", "order_number", "customer_number") if rng.random() < 0.7]
    meta_keys = ["invoice_number", "invoice_date", *optional]
    rng.shuffle(meta_keys)
    items = rng.sample(CATALOGUE, 14)
    return InvoiceTemplate(
        labels=labels,
        colon=rng.choice((":", "")),
        header=rng.choice(("logo_left", "logo_right", "centered")),
        identity_in_header=rng.random() < 0.5,
        meta_left=rng.random() < 0.3,
        meta_keys=tuple(meta_keys),
        body_size=rng.choice((10, 11, 11, 12)),
        title_size=rng.choice((18, 20, 22, 26)),
        name_size=rng.choice((14, 15, 16, 18)),
        row_height=rng.choice((18, 20, 22, 24)),
        band_table_header=rng.random() < 0.5,
        currency_style=rng.choice(("after_total", "column", "line")),
        date_format=locale.date_format
        if rng.random() < 0.85
        else rng.choice(ALTERNATIVE_DATE_FORMATS),
        invoice_number_pattern=rng.choice(
            ("INV-{year}-#####", "#######", "RE{year}####", "F-######", "{year}/####", "@@-#####")
        ),
        customer_number_pattern=rng.choice(("C#####", "KD-#####", "######", "CUST-####")),
        order_number_pattern=rng.choice(("PO-######", "########", "ORD#####", "@@####-##")),
        due_days=rng.choice((14, 30, 30, 45, 60)),
        catalogue=tuple((name, round(rng.uniform(2, 900), 2)) for name in items),
        position_column=rng.random() < 0.4,
    )


def render_invoice(
    company: Company,
    template: InvoiceTemplate,
    document_id: str,
    rng: random.Random,
    items_range: tuple[int, int],
    long_probability: float,
    long_items_range: tuple[int, int],
) -> SyntheticDocument:
    """Lay out one invoice of `company` (one or more pages) and record its askable values.

    Args:
        company: the provider.
        template: the provider's layout template.
        document_id: id of the new document.
        rng: the document's random generator.
        items_range: inclusive range of the number of line items of an ordinary invoice.
        long_probability: chance of a long invoice that usually runs over several pages.
        long_items_range: inclusive range of the number of line items of a long invoice.

    Returns:
        The document with its pages laid out (questions not drawn yet).
    """
    locale = LOCALES[company.locale]
    labels = template.labels
    colon = template.colon
    n_items = rng.randint(*(long_items_range if rng.random() < long_probability else items_range))
    year = rng.randint(2019, 2024)
    issued = dt.date(year, 1, 1) + dt.timedelta(days=rng.randrange(365))
    values = {
        "invoice_number": fill_digits(template.invoice_number_pattern.format(year=year), rng),
        "invoice_date": locale.format_date(issued, template.date_format),
        "due_date": locale.format_date(
            issued + dt.timedelta(days=template.due_days), template.date_format
        ),
        "order_number": fill_digits(template.order_number_pattern, rng),
        "customer_number": fill_digits(template.customer_number_pattern, rng),
    }
    customer = f"{company_stem(rng)} {rng.choice(CUSTOMER_TRADES)} {rng.choice(locale.legal_forms)}"
    customer_attention = person_name(rng)
    city, postcode = rng.choice(locale.cities)
    customer_city = locale.city_pattern.format(city=city, postcode=fill_digits(postcode, rng))
    lines = []
    for name, base_price in rng.sample(template.catalogue, min(n_items, len(template.catalogue))):
        quantity = rng.choice((1, 1, 2, 3, 4, 5, 6, 8, 10, 12, 20, 25, 40))
        price = round(base_price * rng.uniform(0.9, 1.1), 2)
        lines.append((name, quantity, price, round(quantity * price, 2)))
    while len(lines) < n_items:  # long invoices repeat catalogue items with a period suffix
        name, base_price = rng.choice(template.catalogue)
        quantity = rng.randint(1, 9)
        lines.append(
            (f"{name} lot {len(lines) + 1}", quantity, base_price, round(quantity * base_price, 2))
        )
    subtotal = round(sum(line[3] for line in lines), 2)
    tax_rate = rng.choice(locale.tax_rates)
    tax = round(subtotal * float(tax_rate.rstrip("%")) / 100, 2)
    total = round(subtotal + tax, 2)

    doc = SyntheticDocument(document_id=document_id, provider_id=company.provider_id)
    size = template.body_size
    remaining = list(lines)
    pages_rows: list[list[tuple]] = []
    # Paginate: rows per page depend on whether the page is the first and whether it holds the totals.
    first = True
    while True:
        top = _table_top(template) if first else 110
        rows_without_totals = int(
            (FOOTER_TOP - 10 - top - template.row_height) // template.row_height
        )
        rows_with_totals = int(
            (FOOTER_TOP - 10 - top - template.row_height - _totals_height(template))
            // template.row_height
        )
        if len(remaining) <= rows_with_totals:
            pages_rows.append(remaining)
            break
        take = max(1, min(rows_without_totals, len(remaining) - 1))
        pages_rows.append(remaining[:take])
        remaining = remaining[take:]
        first = False
    page_count = len(pages_rows)

    position = 0
    for page_number, rows in enumerate(pages_rows):
        page = doc.new_page()
        if page_number == 0:
            _first_page_header(
                doc, page, company, template, values, customer, customer_attention, customer_city
            )
            y = _table_top(template)
        else:
            page.text(MARGIN, 40, company.name, size + 2, bold=True)
            doc.mark("provider_name", company.name)
            label = f"{labels['invoice_number']}{colon}"
            _, right = page.text(RIGHT, 44, values["invoice_number"], size, align="right")
            page.text(
                right - text_width(values["invoice_number"], size) - 8,
                44,
                label,
                size,
                align="right",
            )
            doc.mark("invoice_number", values["invoice_number"])
            y = 110
        y = _table_header(page, template, locale.currency, y)
        for name, quantity, price, amount in rows:
            position += 1
            x_desc = MARGIN
            if template.position_column:
                page.text(MARGIN, y, str(position), size)
                x_desc = MARGIN + 28
            page.text(x_desc, y, name, size)
            page.text(345, y, str(quantity), size, align="right")
            page.text(445, y, locale.format_amount(price), size, align="right")
            page.text(RIGHT, y, locale.format_amount(amount), size, align="right")
            doc.mark("line_item_quantity", str(quantity), item=name)
            doc.mark("line_item_unit_price", locale.format_amount(price), item=name)
            doc.mark("line_item_amount", locale.format_amount(amount), item=name)
            y += template.row_height
        page.line(MARGIN, y, RIGHT, y)
        if page_number == len(pages_rows) - 1:
            _totals(doc, page, template, locale, y + 12, subtotal, tax_rate, tax, total)
        _footer(doc, page, company, template, page_number + 1, page_count)
    return doc


def _table_top(template: InvoiceTemplate) -> int:
    """Top of the line-item table on the first page."""
    return 300 if template.identity_in_header else 260


def _totals_height(template: InvoiceTemplate) -> int:
    """Height the totals block needs below the table."""
    return 4 * (template.body_size + 10) + 30


def _first_page_header(
    doc,
    page: Page,
    company: Company,
    template: InvoiceTemplate,
    values,
    customer,
    attention,
    customer_city,
) -> None:
    """Logo, provider name and identity, title, customer block and the invoice's key values."""
    labels, size, colon = template.labels, template.body_size, template.colon
    identity_lines = [
        (company.street, "provider_address"),
        (company.city_line, "provider_city"),
        (f"{labels['phone']} {company.phone}", "provider_phone"),
        (f"{labels['email']} {company.email}", "provider_email"),
    ]
    if template.header == "logo_left":
        draw_logo(page, MARGIN, 36, 44, company.logo_style, company.colour)
        page.text(MARGIN + 54, 40, company.name, template.name_size, bold=True)
        x, align = MARGIN + 54, "left"
        page.text(
            RIGHT,
            40,
            labels["title"],
            template.title_size,
            bold=True,
            colour=company.colour,
            align="right",
        )
    elif template.header == "logo_right":
        draw_logo(page, RIGHT - 44, 36, 44, company.logo_style, company.colour)
        page.text(MARGIN, 40, company.name, template.name_size, bold=True)
        x, align = MARGIN, "left"
        page.text(
            RIGHT - 54,
            44,
            labels["title"],
            template.title_size,
            bold=True,
            colour=company.colour,
            align="right",
        )
    else:
        draw_logo(page, PAGE_WIDTH / 2 - 20, 30, 40, company.logo_style, company.colour)
        page.text(PAGE_WIDTH / 2, 76, company.name, template.name_size, bold=True, align="center")
        x, align = PAGE_WIDTH / 2, "center"
    doc.mark("provider_name", company.name)
    y = (
        40 + template.name_size + 10
        if template.header != "centered"
        else 76 + template.name_size + 8
    )
    if template.identity_in_header:
        for text, key in identity_lines:
            page.text(x, y, text, size, align=align)
            _mark_identity(doc, key, company)
            y += size + 4
    if template.header == "centered":
        page.text(
            MARGIN, y + 6, labels["title"], template.title_size, bold=True, colour=company.colour
        )
        y += template.title_size + 10
    y = max(y, 110) + 16
    customer_x, meta_x = (330, MARGIN) if template.meta_left else (MARGIN, 330)
    page.text(customer_x, y, f"{labels['bill_to']}{colon}", size, bold=True)
    page.text(customer_x, y + size + 5, customer, size)
    doc.mark("customer_name", customer)
    page.text(customer_x, y + 2 * (size + 5), attention, size)
    page.text(customer_x, y + 3 * (size + 5), customer_city, size)
    label_width = max(text_width(f"{labels[k]}{colon}", size) for k in template.meta_keys) + 10
    for row, key in enumerate(template.meta_keys):
        row_y = y + row * (size + 6)
        page.text(meta_x, row_y, f"{labels[key]}{colon}", size)
        page.text(meta_x + label_width, row_y, values[key], size, bold=key == "invoice_number")
        doc.mark(key, values[key])
    if template.currency_style == "line":
        row_y = y + len(template.meta_keys) * (size + 6)
        page.text(meta_x, row_y, f"{labels['currency']}{colon}", size)
        currency = LOCALES[company.locale].currency
        page.text(meta_x + label_width, row_y, currency, size)
        doc.mark("currency", currency)


def _mark_identity(doc: SyntheticDocument, key: str, company: Company) -> None:
    """Record the identity value printed by an identity line."""
    value = {
        "provider_address": company.street,
        "provider_city": company.city,
        "provider_phone": company.phone,
        "provider_email": company.email,
        "provider_vat_id": company.vat_id,
        "provider_iban": company.iban,
    }[key]
    doc.mark(key, value)


def _table_header(page: Page, template: InvoiceTemplate, currency: str, y: int) -> int:
    """Column titles of the line-item table; returns the y of the first row."""
    labels, size = template.labels, template.body_size
    if template.band_table_header:
        page.rectangle((MARGIN - 4, y - 4, RIGHT + 4, y + size + 6), fill=(225, 228, 235))
    x_desc = MARGIN
    if template.position_column:
        page.text(MARGIN, y, "#", size, bold=True)
        x_desc = MARGIN + 28
    page.text(x_desc, y, labels["description"], size, bold=True)
    page.text(345, y, labels["quantity"], size, bold=True, align="right")
    page.text(445, y, labels["unit_price"], size, bold=True, align="right")
    amount_label = labels["amount"] + (
        f" {currency}" if template.currency_style == "column" else ""
    )
    page.text(RIGHT, y, amount_label, size, bold=True, align="right")
    if not template.band_table_header:
        page.line(MARGIN, y + size + 6, RIGHT, y + size + 6)
    return y + size + 14


def _totals(
    doc: SyntheticDocument,
    page: Page,
    template: InvoiceTemplate,
    locale,
    y: int,
    subtotal,
    tax_rate,
    tax,
    total,
) -> None:
    """Subtotal, tax and total rows under the table."""
    labels, size, colon = template.labels, template.body_size, template.colon
    step = size + 10
    rows = [
        (f"{labels['subtotal']}{colon}", locale.format_amount(subtotal), "subtotal"),
        (f"{labels['tax']} {tax_rate}", locale.format_amount(tax), "tax_amount"),
    ]
    for label, value, key in rows:
        page.text(350, y, label, size)
        page.text(RIGHT, y, value, size, align="right")
        doc.mark(key, value)
        if key == "tax_amount":
            doc.mark("tax_rate", tax_rate)
        y += step
    total_text = locale.format_amount(total)
    if template.currency_style == "after_total":
        page.text(RIGHT, y, f"{total_text} {locale.currency}", size + 1, bold=True, align="right")
        doc.mark("currency", locale.currency)
    else:
        page.text(RIGHT, y, total_text, size + 1, bold=True, align="right")
    page.text(350, y, f"{labels['total']}{colon}", size + 1, bold=True)
    doc.mark("total_amount", total_text)
    page.text(MARGIN, y + step + 6, labels["thanks"], size)


def _footer(
    doc: SyntheticDocument,
    page: Page,
    company: Company,
    template: InvoiceTemplate,
    number: int,
    count: int,
) -> None:
    """Footer rule, the provider's identity items and the page number."""
    labels = template.labels
    size = 9
    page.line(MARGIN, FOOTER_TOP, RIGHT, FOOTER_TOP, colour=company.colour)
    items: list[tuple[str, str | None]] = []
    if not template.identity_in_header:
        items += [
            (company.name, "provider_name"),
            (company.street, "provider_address"),
            (company.city_line, "provider_city"),
            (f"{labels['phone']} {company.phone}", "provider_phone"),
            (f"{labels['email']} {company.email}", "provider_email"),
        ]
    items += [
        (f"{labels['vat_id']} {company.vat_id}", "provider_vat_id"),
        (f"{labels['iban']} {company.iban}", "provider_iban"),
        (f"{labels['web']} {company.website}", None),
    ]
    x, y = MARGIN, FOOTER_TOP + 8
    for text, key in items:
        width = text_width(text, size)
        if x + width > RIGHT:
            x, y = MARGIN, y + size + 5
        page.text(x, y, text, size, colour=(70, 70, 70))
        if key == "provider_name":
            doc.mark(key, company.name)
        elif key:
            _mark_identity(doc, key, company)
        x += width + 18
    page.text(
        RIGHT,
        PAGE_HEIGHT - 26,
        f"{labels['page']} {number} {labels['of']} {count}",
        size,
        align="right",
    )
