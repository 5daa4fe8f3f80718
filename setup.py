"""Only the optional native accelerator; the package's metadata is in pyproject.toml.

``fold._native`` is built when a C++17 compiler and the Python headers are present. Without
them the install still succeeds (``optional=True``) and the fold uses its polars paths.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "fold._native",
            sources=["fold/_native.cc"],
            depends=[
                "fold/inputs/native_src/arrow_export.h",
                "fold/inputs/native_src/cadence.h",
                "fold/inputs/native_src/cadence_module.h",
                "fold/inputs/native_src/collect.h",
                "fold/inputs/native_src/fold_pass.h",
                "fold/inputs/native_src/fold_tables.h",
                "fold/inputs/native_src/hash_table.h",
                "fold/inputs/native_src/json_line.h",
                "fold/inputs/native_src/json_scan.h",
                "fold/inputs/native_src/line_order.h",
                "fold/inputs/native_src/line_places.h",
                "fold/inputs/native_src/line_parse.h",
                "fold/inputs/native_src/parallel.h",
                "fold/inputs/native_src/python_values.h",
                "fold/inputs/native_src/read_range.h",
                "fold/inputs/native_src/request_keys.h",
                "fold/inputs/native_src/request_columns.h",
                "fold/inputs/native_src/resample.h",
                "fold/inputs/native_src/resample_module.h",
                "fold/inputs/native_src/step_export.h",
                "fold/inputs/native_src/used_pages.h",
            ],
            language="c++",
            extra_compile_args=["-O2", "-std=c++17", "-fvisibility=hidden"],
            optional=True,
        )
    ]
)
