from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

import events
from accounts.roles import role_of


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Pushes live events to signed-in viewers; anonymous sockets are refused."""

    async def connect(self):
        # Accept, then close with a reason: a refused handshake would hide the code from
        # the browser, which would then keep reconnecting.
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        if await database_sync_to_async(role_of)(user) is None:
            await self.close(code=4403)
            return
        await events.subscribe(self.channel_layer, self.channel_name)

    async def disconnect(self, code):
        await events.unsubscribe(self.channel_layer, self.channel_name)

    async def live_event(self, message):
        await self.send_json(message["event"])
