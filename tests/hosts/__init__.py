"""Real systemd test hosts (systemd-nspawn in network namespaces) for the Ansible roles."""
