"""Where responses are kept between calls and runs: the response cache and the cassette."""
