"""regioncount: count, certify and draw the regions of piecewise networks.

The public surface is :data:`__all__`; everything else lives in private modules. Names are imported on first
use, so ``import regioncount`` and the bounds (``regioncount.BOUNDS``) do not import JAX. The x64 policy is in
``regioncount/_config.py``: regioncount's JAX entry points compute in float64 and leave the caller's
``jax_enable_x64`` as they found it.
"""

from . import _config  # noqa: F401  (pytree registration once JAX is imported; imports nothing heavy)
from ._lazy import lazy_exports

__version__ = "0.1.0"

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)

_EXPORTS = {
    # entry points
    "count_regions": "._count",
    "count_record": "._count",
    "choose_engine": "._count",
    "region_kind": "._count",
    "as_json_ready": "._count",
    "METHODS": "._count",
    "PLANE_BYTES_PER_REGION": "._count",
    "scan": "._scan",
    "rows_to_csv": "._scan",
    "counted_cells": "._scan",
    "default_workers": "._scan",
    # domains
    "Box": "._domain",
    "Segment": "._domain",
    "Slice": "._domain",
    "AffineSlice": "._domain",
    "slice_through": "._domain",
    "domain_from_dict": "._domain",
    "count_decisions": "._decide",
    # an atlas page's data: the exact partition as drawable pieces, codes, maps and views
    "Atlas": "._atlas_data",
    "atlas_data": "._atlas_data",
    # exact 2D partitions as GeoParquet / GeoJSON files
    "exact_partition_2d": "._export",
    "export_bytes": "._export",
    "export_format": "._export",
    "export_partition": "._export",
    "partition_geojson": "._export",
    "partition_geoparquet": "._export",
    "class_of_cells": "._decide",
    # regions through training, local complexity, topology of decision regions
    "track": "._track",
    "checkpoint_files": "._track",
    "count_checkpoint": "._track",
    "track_tables": "._track",
    "finish_track": "._track",
    "local_complexity": "._local",
    "read_points": "._local",
    "decision_topology": "._decide",
    # labels of results (str enums: members equal their strings)
    "Method": "._enums",
    "Picture": "._enums",
    "Kind": "._enums",
    # what a picture shows, computed (regioncount.plotting draws these)
    "RegionSource": "._views",
    "SampledImage": "._views",
    "region_source": "._views",
    "sample_image": "._views",
    "exact_partition": "._views",
    "exact_solid": "._views",
    "level_segments": "._views",
    "level_values": "._views",
    "shared_edges": "._views",
    "truncations": "._views",
    "Section": "._views",
    "box_sections": "._views",
    "CompiledComparison": "._views",
    "compare_compiled": "._views",
    "DecisionView": "._views",
    "decision_view": "._views",
    # errors
    "CurvedBoundaryError": "._errors",
    "DegreeTooHighError": "._errors",
    "DomainError": "._errors",
    "MemoryCapError": "._errors",
    "ModelFileError": "._errors",
    "NotPiecewiseError": "._errors",
    "RegionCountError": "._errors",
    "InexactError": "._errors",
    "CertificateError": "._errors",
    "KeySetError": "._errors",
    "ResidentMemoryError": "._errors",
    "WriteError": "._errors",
    # the measured memory limit (resident set size) the engines check as they grow
    "rss_bytes": "._memory",
    "check_rss": "._memory",
    "set_rss_limit": "._memory",
    "children_rss_bytes": "._memory",
    # model files
    "load_model": "._io",
    "save_model": "._io",
    "write_atomic": "._io",
    "model_bytes": "._io",
    "is_state_dict": "._io",
    "load_network": "._loaders",
    "load_onnx": "._loaders",
    "from_torch": "._loaders",
    # engines (the plane and line engines are NumPy: importing them does not import JAX)
    "LinePieces": ".engines._line",
    "walk_line": ".engines._line",
    "partition_plane": ".engines._plane",
    "partition_space": ".engines._space",
    "partition_curved": ".engines._curved",
    "TiledCount": ".engines._tiles",
    "count_tiled": ".engines._tiles",
    "SampleCount": ".engines._sample",
    "count_sampled": ".engines._sample",
    "grid_codes": ".engines._sample",
    "forward_codes": ".engines._forward",
    # networks
    "MLP": ".networks",
    "Block": ".networks",
    "Maxout": ".networks",
    "Program": ".networks",
    "Transformer": ".networks",
    "lower": ".networks",
    "random_maxout": ".networks",
    "random_mlp": ".networks",
    "random_transformer": ".networks",
    "truncate": ".networks",
    "ConvNet": ".networks",
    "DecisionNet": ".networks",
    # relations
    "RelationModel": ".relations",
    "fit_relation": ".relations",
    "retrieval_error": ".relations",
    "retrieval_partition": ".relations",
    # results
    "Partition": ".results",
    "Polytopes": ".results",
    "Cells": ".results",
    "Topology": ".results",
    "topology": ".results",
    "certify": ".engines._certify",
    "CountRecord": ".results",
    "RegionResult": ".results",
    # theory (bounds are pure Python ints)
    "BOUNDS": ".theory._bounds",
    "maxout_lower": ".theory._bounds",
    "relu_lower_serra": ".theory._bounds",
    "relu_upper_serra": ".theory._bounds",
    "transformer_maxout_lower": ".theory._bounds",
    "bound_attaining_transformer": ".theory._compile",
    "compile_maxout": ".theory._compile",
    "product_maxout": ".theory._constructions",
    "product_relu": ".theory._constructions",
}

__all__ = sorted(_EXPORTS)

#: Public subpackages, reachable as attributes: ``regioncount.theory.LAYOUTS``, ``regioncount.plotting``, ...
_SUBPACKAGES = ("engines", "networks", "plotting", "relations", "results", "theory")

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, _SUBPACKAGES)

if TYPE_CHECKING:  # the same names, imported eagerly, for type checkers and editors
    from ._atlas_data import Atlas as Atlas, atlas_data as atlas_data
    from ._count import (
        METHODS as METHODS,
        PLANE_BYTES_PER_REGION as PLANE_BYTES_PER_REGION,
        as_json_ready as as_json_ready,
        choose_engine as choose_engine,
        count_record as count_record,
        count_regions as count_regions,
        region_kind as region_kind,
    )
    from ._decide import (
        class_of_cells as class_of_cells,
        count_decisions as count_decisions,
        decision_topology as decision_topology,
    )
    from ._domain import (
        AffineSlice as AffineSlice,
        Box as Box,
        Segment as Segment,
        Slice as Slice,
        domain_from_dict as domain_from_dict,
        slice_through as slice_through,
    )
    from ._enums import Kind as Kind, Method as Method, Picture as Picture
    from ._errors import (
        CertificateError as CertificateError,
        CurvedBoundaryError as CurvedBoundaryError,
        DegreeTooHighError as DegreeTooHighError,
        DomainError as DomainError,
        InexactError as InexactError,
        KeySetError as KeySetError,
        MemoryCapError as MemoryCapError,
        ModelFileError as ModelFileError,
        NotPiecewiseError as NotPiecewiseError,
        RegionCountError as RegionCountError,
        ResidentMemoryError as ResidentMemoryError,
        WriteError as WriteError,
    )
    from ._export import (
        exact_partition_2d as exact_partition_2d,
        export_bytes as export_bytes,
        export_format as export_format,
        export_partition as export_partition,
        partition_geojson as partition_geojson,
        partition_geoparquet as partition_geoparquet,
    )
    from ._io import (
        is_state_dict as is_state_dict,
        load_model as load_model,
        model_bytes as model_bytes,
        save_model as save_model,
        write_atomic as write_atomic,
    )
    from ._loaders import from_torch as from_torch, load_network as load_network, load_onnx as load_onnx
    from ._local import local_complexity as local_complexity, read_points as read_points
    from ._memory import (
        check_rss as check_rss,
        children_rss_bytes as children_rss_bytes,
        rss_bytes as rss_bytes,
        set_rss_limit as set_rss_limit,
    )
    from ._scan import (
        counted_cells as counted_cells,
        default_workers as default_workers,
        rows_to_csv as rows_to_csv,
        scan as scan,
    )
    from ._track import (
        checkpoint_files as checkpoint_files,
        count_checkpoint as count_checkpoint,
        finish_track as finish_track,
        track as track,
        track_tables as track_tables,
    )
    from ._views import (
        CompiledComparison as CompiledComparison,
        DecisionView as DecisionView,
        RegionSource as RegionSource,
        SampledImage as SampledImage,
        Section as Section,
        box_sections as box_sections,
        compare_compiled as compare_compiled,
        decision_view as decision_view,
        exact_partition as exact_partition,
        exact_solid as exact_solid,
        level_segments as level_segments,
        level_values as level_values,
        region_source as region_source,
        sample_image as sample_image,
        shared_edges as shared_edges,
        truncations as truncations,
    )
    from .engines._certify import certify as certify
    from .engines._curved import partition_curved as partition_curved
    from .engines._forward import forward_codes as forward_codes
    from .engines._line import LinePieces as LinePieces, walk_line as walk_line
    from .engines._plane import partition_plane as partition_plane
    from .engines._sample import SampleCount as SampleCount, count_sampled as count_sampled, grid_codes as grid_codes
    from .engines._space import partition_space as partition_space
    from .engines._tiles import TiledCount as TiledCount, count_tiled as count_tiled
    from .networks import (
        MLP as MLP,
        Block as Block,
        ConvNet as ConvNet,
        DecisionNet as DecisionNet,
        Maxout as Maxout,
        Program as Program,
        Transformer as Transformer,
        lower as lower,
        random_maxout as random_maxout,
        random_mlp as random_mlp,
        random_transformer as random_transformer,
        truncate as truncate,
    )
    from .relations import (
        RelationModel as RelationModel,
        fit_relation as fit_relation,
        retrieval_error as retrieval_error,
        retrieval_partition as retrieval_partition,
    )
    from .results import (
        Cells as Cells,
        CountRecord as CountRecord,
        Partition as Partition,
        Polytopes as Polytopes,
        RegionResult as RegionResult,
        Topology as Topology,
        topology as topology,
    )
    from .theory._bounds import (
        BOUNDS as BOUNDS,
        maxout_lower as maxout_lower,
        relu_lower_serra as relu_lower_serra,
        relu_upper_serra as relu_upper_serra,
        transformer_maxout_lower as transformer_maxout_lower,
    )
    from .theory._compile import (
        bound_attaining_transformer as bound_attaining_transformer,
        compile_maxout as compile_maxout,
    )
    from .theory._constructions import product_maxout as product_maxout, product_relu as product_relu
