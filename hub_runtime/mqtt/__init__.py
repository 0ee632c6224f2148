"""The MQTT interface: the link to the broker, topics, payloads, Hermes, outbox, embedded broker."""
