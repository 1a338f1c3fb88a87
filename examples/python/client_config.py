"""A fedcaf client config as the examples read their own keys from it: the
YAML file, then each `--set KEY.PATH=VALUE` (the value read as YAML), as
fedcaf applies them, so that an override of data_configs moves the data a
client trains on as well as what fedcaf.Client sees. Needs PyYAML (Debian:
python3-yaml), imported when a config is read."""


def read_client_config(path, overrides=()):
    """The config at `path` (a dict) after each "KEY.PATH=VALUE" override."""
    import yaml
    with open(path) as f:
        cfg = yaml.safe_load(f) or {}
    for item in overrides:
        key, _, value = item.partition("=")
        *parents, last = key.split(".")
        node = cfg
        for k in parents:
            if not isinstance(node.get(k), dict):
                node[k] = {}
            node = node[k]
        node[last] = yaml.safe_load(value)
    return cfg
