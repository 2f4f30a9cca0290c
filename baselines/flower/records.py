"""The kit's messages as Flower records, and Flower's own bytes around them.

A broadcast or an update travels as two records: an ``ArrayRecord`` holding the kit's encoded
message (:class:`~baselines.wire.EncodedMessage`, a safetensors file) byte for byte as the data
of one ``uint8`` array, which Flower sends in chunks of 5 MB (a VT5-base FedAvg message is about 1 GB,
past what one object of Flower's should carry), and a ``ConfigRecord`` of the few fields the
receiver needs to decode and log it. A client's personalisation (track 3) comes back as an
``ArrayRecord`` of its state: the tensors its personal model is built from, which are the
submission's, not a federated message (the kit's log has nothing coming back). What Flower adds
(the message's metadata, the records and the object tree it sends the content as) is measured by
deflating the message the way Flower does before sending (:func:`flower_bytes`), not estimated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baselines.engine.client import ClientReply
from baselines.wire import EncodedMessage

if TYPE_CHECKING:
    import torch
    from flwr.app import Message, RecordDict

#: record names of a message's content.
WIRE = "wire"
REPLY = "reply"
METRICS = "metrics"
PERSONAL = "personal"
#: the array of a wire record, and the suffix of its fields' record.
PAYLOAD = "payload"
FIELDS = "fields"
#: the wire array's serialisation type: its data is the payload itself (not NumPy's format)
RAW_BYTES = "bytes"


def put_wire(content: RecordDict, key: str, message: EncodedMessage, names: tuple[str, ...]) -> None:
    """Store ``message`` in ``content`` under ``key``: its payload unchanged as one ``uint8``
    array (an ``ArrayRecord``) and its fields as the ``ConfigRecord`` ``key.fields``.

    ``names`` is the run's communicated set, which both ends know: the tensor names are sent
    only when the message carries another set, so a message's Flower bytes are its payload plus
    Flower's framing and a few dozen bytes of fields.
    """
    from flwr.app import Array, ArrayRecord, ConfigRecord

    fields: dict[str, object] = {
        "data_bytes": message.data_bytes,
        "format": message.format,
        "official_logger_bytes": message.official_logger_bytes,
    }
    if tuple(message.names) != tuple(names):
        fields["names"] = list(message.names)
    # the payload's own bytes object (no copy): Flower slices it into chunks through a memoryview
    payload = Array(dtype="uint8", shape=(len(message.payload),), stype=RAW_BYTES,
                    data=message.payload)  # fmt: skip
    content[key] = ArrayRecord({PAYLOAD: payload})
    content[f"{key}.{FIELDS}"] = ConfigRecord(fields)


def wire_message(content: RecordDict, key: str, names: tuple[str, ...]) -> EncodedMessage:
    """The kit's message stored by :func:`put_wire` under ``key``.

    Raises:
        KeyError: ``content`` has no such message.
    """
    fields = content[f"{key}.{FIELDS}"]
    return EncodedMessage(
        payload=bytes(content[key][PAYLOAD].data),
        data_bytes=int(fields["data_bytes"]),  # type: ignore[arg-type]
        names=tuple(fields.get("names", names)),  # type: ignore[arg-type]
        format=str(fields["format"]),
        official_logger_bytes=int(fields["official_logger_bytes"]),  # type: ignore[arg-type]
    )


def broadcast_content(
    message: EncodedMessage, names: tuple[str, ...], federated_round: int, clients: list[int]
) -> RecordDict:
    """A train message's content: the broadcast and the clients of the node to train."""
    from flwr.app import ConfigRecord, RecordDict

    content = RecordDict({"round": ConfigRecord({"round": federated_round, "clients": clients})})
    put_wire(content, WIRE, message, names)
    return content


def reply_content(
    replies: dict[int, ClientReply], names: tuple[str, ...], setup_seconds: float
) -> RecordDict:
    """A node's answer: per client, its encoded update, weight, training time and metrics.

    ``setup_seconds`` is the time the node's app spent building its party in this process
    (model, data) before training: 0 when it was already built.
    """
    from flwr.app import ConfigRecord, MetricRecord, RecordDict

    content = RecordDict()
    for client, reply in replies.items():
        put_wire(content, f"{WIRE}.{client}", reply.message, names)
        content[f"{REPLY}.{client}"] = ConfigRecord(
            {
                "num_examples": reply.num_examples,
                "seconds": reply.seconds,
                "setup_seconds": setup_seconds,
            }
        )
        content[f"{METRICS}.{client}"] = MetricRecord(
            {key: float(value) for key, value in reply.metrics.items()}
        )
    return content


def client_reply(
    content: RecordDict, client: int, names: tuple[str, ...]
) -> tuple[ClientReply, float]:
    """Client ``client``'s reply from a node's answer, and the node's setup seconds.

    Raises:
        ValueError: the answer has no update of that client.
    """
    key = f"{WIRE}.{client}"
    if key not in content:
        raise ValueError(f"the node's answer has no update of client {client}")
    reply = content[f"{REPLY}.{client}"]
    return ClientReply(
        message=wire_message(content, key, names),
        num_examples=int(reply["num_examples"]),
        metrics={key: float(value) for key, value in content[f"{METRICS}.{client}"].items()},
        seconds=float(reply["seconds"]),
    ), float(reply.get("setup_seconds", 0.0))


def personalise_content(
    message: EncodedMessage | None, names: tuple[str, ...], federated_round: int, client: int
) -> RecordDict:
    """A personalise message's content: the final global model (none after 0 rounds: the
    client starts from the base it holds) and the client to personalise."""
    from flwr.app import ConfigRecord, RecordDict

    content = RecordDict({"round": ConfigRecord({"round": federated_round, "clients": [client]})})
    if message is not None:
        put_wire(content, WIRE, message, names)
    return content


def personal_content(
    state: dict[str, torch.Tensor], seconds: float, setup_seconds: float
) -> RecordDict:
    """A node's answer to a personalise message: the client's state and the seconds spent."""
    from flwr.app import ArrayRecord, ConfigRecord, RecordDict

    return RecordDict(
        {
            PERSONAL: ArrayRecord(
                {name: tensor.detach().cpu().contiguous() for name, tensor in state.items()}
            ),
            REPLY: ConfigRecord({"seconds": seconds, "setup_seconds": setup_seconds}),
        }
    )


def personal_state(content: RecordDict) -> tuple[dict[str, torch.Tensor], float, float]:
    """A client's state from a node's personalise answer, the personalisation's seconds and the
    node's setup seconds.

    Raises:
        KeyError: the answer has no state.
    """
    reply = content[REPLY]
    return (
        dict(content[PERSONAL].to_torch_state_dict()),
        float(reply["seconds"]),
        float(reply.get("setup_seconds", 0.0)),
    )


def tensor_bytes(state: dict[str, torch.Tensor]) -> int:
    """Bytes of the tensors' data (what a personalise answer carries before Flower's framing)."""
    return sum(tensor.numel() * tensor.element_size() for tensor in state.values())


def flower_bytes(message: Message) -> int:
    """Bytes of ``message`` as Flower sends it: the message object and every nested object.

    Flower (1.2x and later) deflates a message into an object tree (the message, its
    ``RecordDict``, each record, each array chunk) and pushes each object's bytes; this is the
    sum of those bytes. The HTTP/2 and TLS framing of the transport come on top.
    """
    from flwr.supercore.inflatable.inflatable_object import (
        get_all_nested_objects,
        no_object_id_recompute,
    )

    # Each object's id is its deflated bytes' hash, over its children's ids: computed once here,
    # as Flower does when it pushes (recomputed at every level, a 1 GB message took minutes).
    with no_object_id_recompute():
        return sum(len(obj.deflate()) for obj in get_all_nested_objects(message).values())
