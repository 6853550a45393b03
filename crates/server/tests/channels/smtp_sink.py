"""An SMTP server for Holdpoint's email tests (crates/server/tests/suite/channels.rs), on aiosmtpd.

    smtp_sink.py DIR [PORT]

Listens on 127.0.0.1 at PORT (0 or none: any free port), prints the port it listens on as the
first line of its output, and writes each message it receives to DIR as N.json (written under
another name, then renamed, so a reader never sees half of one): the envelope's recipients,
the From, To, Subject and Message-ID headers, and the text/plain and text/html parts decoded.
"""

import asyncio
import email
import email.policy
import itertools
import json
import os
import sys

from aiosmtpd.smtp import SMTP


class Sink:
    def __init__(self, directory):
        self.directory = directory
        self.count = itertools.count()

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        parts = {"text/plain": None, "text/html": None}
        for part in message.walk():
            if part.get_content_type() in parts and parts[part.get_content_type()] is None:
                parts[part.get_content_type()] = part.get_content()
        record = {
            "rcpt_tos": envelope.rcpt_tos,
            "from": str(message["From"]),
            "to": str(message["To"]),
            "subject": str(message["Subject"]),
            "message_id": str(message["Message-ID"]),
            "text": parts["text/plain"],
            "html": parts["text/html"],
        }
        n = next(self.count)
        temporary = os.path.join(self.directory, f".{n}.tmp")
        with open(temporary, "w") as f:
            json.dump(record, f)
        os.rename(temporary, os.path.join(self.directory, f"{n}.json"))
        return "250 OK"


async def main():
    directory = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    sink = Sink(directory)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(sink), "127.0.0.1", port)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


asyncio.run(main())
