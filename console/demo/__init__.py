"""The demo and the tests' hosts: the simulated GPU host, its scripted operators, sshd on loopback."""
