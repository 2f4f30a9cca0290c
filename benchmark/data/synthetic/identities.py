"""Company identities: the sensitive information of a provider (name, address, contacts, bank).

PFL providers and public-corpus companies draw their trade words from disjoint vocabularies, so
no public company can share a name (or an e-mail domain) with a PFL provider.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from benchmark.data.synthetic.locales import LOCALES, STREET_KINDS, Locale, fill_digits

_ONSETS = (
    "b",
    "br",
    "c",
    "d",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "st",
    "t",
    "v",
    "w",
    "z",
    "tr",
    "kl",
)
_VOWELS = ("a", "e", "i", "o", "u", "ar", "en", "or", "el", "an", "ei", "au")
_CODAS = (
    "",
    "n",
    "s",
    "x",
    "ck",
    "ra",
    "lo",
    "ia",
    "ex",
    "on",
    "io",
    "us",
    "berg",
    "ton",
    "sen",
    "ell",
)

# Trade words of PFL providers (invoice issuers) and of public-corpus companies: disjoint.
PFL_TRADES = (
    "Logistics",
    "Consulting",
    "Systems",
    "Engineering",
    "Solutions",
    "Trading",
    "Software",
    "Electric",
    "Media",
    "Supplies",
    "Services",
    "Analytics",
    "Medical",
    "Print",
    "Energy",
    "Design",
    "Security",
    "Networks",
    "Catering",
    "Construction",
    "Cleaning",
    "Transport",
    "Labs",
    "Partners",
    "Technologies",
    "Industrial",
    "Packaging",
    "Components",
    "Facilities",
    "Marketing",
)
PUBLIC_TRADES = (
    "Bakery",
    "Pharmacy",
    "Hardware",
    "Books",
    "Garden",
    "Florist",
    "Cafe",
    "Market",
    "Motors",
    "Optics",
    "Furniture",
    "Travel",
    "Sports",
    "Pets",
    "Tools",
    "Fashion",
    "Dental",
    "Academy",
    "Clinic",
    "Hotel",
    "Insurance",
    "Club",
    "Kitchen",
    "Studio",
    "Farm",
    "Foods",
    "Wholesale",
    "Outdoor",
    "Music",
    "Toys",
)
CUSTOMER_TRADES = (
    "Holding",
    "Group",
    "Retail",
    "Manufacturing",
    "Hospital",
    "University",
    "Foundation",
    "Bank",
)

FIRST_NAMES = (
    "Anna",
    "Ben",
    "Carla",
    "David",
    "Elena",
    "Felix",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Klara",
    "Leo",
    "Maria",
    "Noah",
    "Olga",
    "Paul",
    "Rosa",
    "Sam",
    "Tara",
    "Victor",
    "Wendy",
    "Yusuf",
    "Zoe",
    "Marco",
)
LAST_NAMES = (
    "Keller",
    "Martin",
    "Rossi",
    "Garcia",
    "Smith",
    "Jansen",
    "Silva",
    "Berg",
    "Dubois",
    "Weber",
    "Moreau",
    "Lopez",
    "Bianchi",
    "de Vries",
    "Costa",
    "Lind",
    "Brown",
    "Fischer",
    "Meyer",
    "Novak",
)


def company_stem(rng: random.Random) -> str:
    """A pronounceable invented name ('Brenvik', 'Stalo')."""
    stem = (
        rng.choice(_ONSETS)
        + rng.choice(_VOWELS)
        + rng.choice(_ONSETS)
        + rng.choice(_VOWELS)
        + rng.choice(_CODAS)
    )
    return stem.capitalize()


def person_name(rng: random.Random) -> str:
    """A person's full name."""
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


@dataclass(frozen=True)
class Company:
    """Identity of a company as printed on its documents.

    Attributes:
        provider_id: stable id used in `data_points.json` and the `provider` record field.
        name: full company name including its legal form.
        locale: code of the country conventions it follows (see `locales.LOCALES`).
        street: first address line.
        city: city name.
        city_line: second address line (postcode and city).
        email, phone, vat_id, iban, website: contacts, tax and bank identifiers.
        logo_style, colour: the drawn logo (shape index and RGB colour).
    """

    provider_id: str
    name: str
    locale: str
    street: str
    city: str
    city_line: str
    email: str
    phone: str
    vat_id: str
    iban: str
    website: str
    logo_style: int
    colour: tuple[int, int, int]

    @property
    def conventions(self) -> Locale:
        """The company's locale conventions."""
        return LOCALES[self.locale]


def make_company(
    provider_id: str, name_parts: tuple[str, str], locale_code: str, rng: random.Random
) -> Company:
    """Build a company from its name parts (stem, trade word), drawing the rest of its identity."""
    locale = LOCALES[locale_code]
    stem, trade = name_parts
    name = f"{stem} {trade} {rng.choice(locale.legal_forms)}"
    kind = rng.choice(STREET_KINDS[locale_code])
    street = locale.street_pattern.format(
        base=rng.choice(locale.street_bases), kind=kind, number=rng.randint(1, 240)
    )
    city, postcode_pattern = rng.choice(locale.cities)
    city_line = locale.city_pattern.format(city=city, postcode=fill_digits(postcode_pattern, rng))
    domain = f"{stem.lower()}-{trade.lower()}.{locale.tld}"
    return Company(
        provider_id=provider_id,
        name=name,
        locale=locale_code,
        street=street,
        city=city,
        city_line=city_line,
        email=f"{rng.choice(locale.mailbox)}@{domain}",
        phone=fill_digits(locale.phone_pattern, rng),
        vat_id=fill_digits(locale.vat_pattern, rng),
        iban=fill_digits(locale.iban_pattern, rng),
        website=f"www.{domain}",
        logo_style=rng.randrange(5),
        colour=(rng.randrange(20, 150), rng.randrange(20, 150), rng.randrange(20, 150)),
    )


def unique_names(
    count: int, trades: tuple[str, ...], rng: random.Random, taken: set[str]
) -> list[tuple[str, str]]:
    """Draw `count` (stem, trade) pairs whose 'stem trade' is not in `taken` (updated in place)."""
    names = []
    while len(names) < count:
        parts = (company_stem(rng), rng.choice(trades))
        key = f"{parts[0]} {parts[1]}"
        if key not in taken:
            taken.add(key)
            names.append(parts)
    return names
