.PHONY: demo test lint

# Install ttft with the embedded engine and run the main job against it.
demo:
	bash scripts/demo.sh

# Install everything the tests need, then ruff, mypy (strict) and pytest.
test:
	bash scripts/test.sh

lint:
	python -m ruff check src tests benchmarks && python -m mypy
