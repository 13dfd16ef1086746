"""Circle packings in the unit square and the disk: circle_packing_26, circle_packing_26_disk, circle_packing_32."""
