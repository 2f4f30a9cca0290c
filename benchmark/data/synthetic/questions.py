"""Key-value question templates, several paraphrases per key (questions are always English).

The key of each template is the record's `question_type`. Keys starting with `provider_` ask
about the identity of the invoice issuer: the information the provider-level DP track protects.
"""

from __future__ import annotations

import random

PARAPHRASES: dict[str, tuple[str, ...]] = {
    # invoices: document values
    "invoice_number": (
        "What is the invoice number?",
        "Which invoice number is shown on this document?",
        "What is the number of this invoice?",
        "What is the invoice no.?",
    ),
    "invoice_date": (
        "What is the invoice date?",
        "When was the invoice issued?",
        "On what date was this invoice issued?",
        "What is the date of the invoice?",
    ),
    "due_date": (
        "When is the payment due?",
        "What is the due date?",
        "By what date must the invoice be paid?",
    ),
    "order_number": (
        "What is the purchase order number?",
        "Which order number does the invoice refer to?",
        "What is the PO number?",
    ),
    "customer_number": (
        "What is the customer number?",
        "Which customer ID is given?",
        "What is the customer's account number?",
    ),
    "customer_name": (
        "Who is the invoice addressed to?",
        "What is the name of the customer?",
        "Who is billed?",
    ),
    "subtotal": (
        "What is the subtotal?",
        "What is the net amount before tax?",
        "What is the total excluding tax?",
    ),
    "tax_amount": (
        "What is the tax amount?",
        "How much VAT is charged?",
        "What is the amount of tax?",
    ),
    "tax_rate": (
        "What is the tax rate?",
        "What VAT rate is applied?",
        "At what percentage is tax charged?",
    ),
    "total_amount": (
        "What is the total amount?",
        "What is the total amount due?",
        "How much has to be paid in total?",
        "What is the invoice total?",
    ),
    "currency": (
        "In which currency is the invoice?",
        "What is the currency of the invoice?",
        "Which currency are the amounts in?",
    ),
    "line_item_amount": (
        "What is the amount for {item}?",
        "How much is charged for {item}?",
        "What is the line total of {item}?",
    ),
    "line_item_quantity": (
        "How many units of {item} were invoiced?",
        "What is the quantity of {item}?",
    ),
    "line_item_unit_price": (
        "What is the unit price of {item}?",
        "How much does one unit of {item} cost?",
    ),
    # invoices: identity of the provider (sensitive)
    "provider_name": (
        "Who issued the invoice?",
        "What is the name of the company that issued this invoice?",
        "Which company is the invoice from?",
        "What is the supplier's name?",
    ),
    "provider_address": (
        "What is the street address of the provider?",
        "What is the supplier's street address?",
        "At which street is the issuing company located?",
    ),
    "provider_city": (
        "In which city is the provider located?",
        "What city is the issuing company based in?",
    ),
    "provider_email": (
        "What is the provider's e-mail address?",
        "Which e-mail address can the supplier be reached at?",
        "What is the e-mail of the issuing company?",
    ),
    "provider_phone": (
        "What is the provider's phone number?",
        "What telephone number is given for the supplier?",
    ),
    "provider_vat_id": (
        "What is the VAT number of the provider?",
        "What is the supplier's tax ID?",
        "Which VAT registration number does the issuing company have?",
    ),
    "provider_iban": (
        "What is the IBAN of the provider?",
        "To which IBAN should the payment be made?",
        "What is the supplier's bank account (IBAN)?",
    ),
    # public corpus: purchase orders, receipts, delivery notes, forms, letters
    "po_number": (
        "What is the purchase order number?",
        "What is the order number?",
        "Which PO number is shown?",
    ),
    "order_date": ("What is the order date?", "When was the order placed?"),
    "delivery_date": (
        "What is the delivery date?",
        "When is the delivery expected?",
        "On what date was it delivered?",
    ),
    "supplier_name": ("Who is the supplier?", "What is the name of the supplier?"),
    "contact_name": ("Who is the contact person?", "What is the name of the contact?"),
    "applicant_phone": (
        "What is the applicant's phone number?",
        "Which phone number did the applicant give?",
    ),
    "company_phone": (
        "What is the company's phone number?",
        "What phone number is printed in the letterhead?",
    ),
    "company_name": ("What is the name of the company?", "Which company issued this document?"),
    "receipt_number": ("What is the receipt number?", "Which receipt number is printed?"),
    "receipt_date": ("What is the date on the receipt?", "When was the purchase made?"),
    "receipt_time": ("At what time was the purchase made?", "What time is printed on the receipt?"),
    "card_number": ("Which card was used for the payment?", "What is the masked card number?"),
    "cashier": ("Who was the cashier?", "What is the name of the cashier?"),
    "item_price": ("How much did {item} cost?", "What is the price of {item}?"),
    "item_quantity": ("How many {item} were ordered?", "What is the quantity of {item}?"),
    "delivery_note_number": (
        "What is the delivery note number?",
        "Which delivery note number is given?",
    ),
    "tracking_number": (
        "What is the tracking number?",
        "Which tracking number is given for the shipment?",
    ),
    "carrier": ("Which carrier delivered the goods?", "Who is the carrier?"),
    "weight": ("What is the total weight?", "How heavy is the shipment?"),
    "packages": ("How many packages were shipped?", "What is the number of packages?"),
    "recipient_name": ("Who is the recipient?", "To whom is the document addressed?"),
    "applicant_name": ("What is the applicant's name?", "Who filled in the form?"),
    "date_of_birth": ("What is the date of birth?", "When was the applicant born?"),
    "membership_number": ("What is the membership number?", "Which member ID is given?"),
    "email": ("What is the e-mail address?", "Which e-mail address is given?"),
    "start_date": ("What is the start date?", "From what date does it start?"),
    "plan": ("Which plan was chosen?", "What is the selected plan?"),
    "letter_date": ("What is the date of the letter?", "When was the letter written?"),
    "reference_number": ("What is the reference number?", "Which reference is quoted?"),
    "signer_name": ("Who signed the letter?", "What is the name of the signatory?"),
    "contract_number": ("What is the contract number?", "Which contract does the letter refer to?"),
    "payment_date": ("When was the payment received?", "On what date was the payment made?"),
    "amount": ("What amount is mentioned?", "How much money is mentioned in the letter?"),
}


def ask(question_type: str, rng: random.Random, **slots: str) -> str:
    """A random paraphrase of the question for `question_type`, with its slots filled.

    Raises:
        KeyError: for an unknown question type.
    """
    return rng.choice(PARAPHRASES[question_type]).format(**slots)
