"""The `gpuwise` command line: a thin shell over :mod:`gpuwise.api` and :mod:`gpuwise.report`."""
