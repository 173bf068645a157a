"""Loaders for the real datasets the four papers use, read from their official on-disk formats.

One module per dataset (:mod:`.celeba`, :mod:`.vggface2`, :mod:`.lfw`, :mod:`.mpii`, :mod:`.ijb`,
:mod:`.movielens`), :mod:`.identity_folders` for any folder-per-identity tree and the identity selection of
the "X-20" protocols, and :mod:`.common` for what they share (path checks, the image budget, decoding).

Nothing is downloaded: each loader reads ``data_root/<DatasetDir>/...`` and, when a file is absent, raises
:class:`~privkit.errors.MissingResourceError` naming the exact files, their official source and where to put
them. The expected layouts:

========================  =====================================================================================
dataset                   files under ``data_root``
========================  =====================================================================================
CelebA                    ``celeba/`` (flat, the torchvision layout) **or** ``CelebA/Img``, ``CelebA/Anno``,
                          ``CelebA/Eval`` (the official Google-Drive layout): ``img_align_celeba/``
                          (or ``img_celeba/`` for in-the-wild images), ``identity_CelebA.txt``,
                          ``list_attr_celeba.txt``, ``list_bbox_celeba.txt``, ``list_eval_partition.txt``,
                          ``list_landmarks_align_celeba.txt``
VGGFace2                  ``VGGFace2/{train,test}/n000001/0001_01.jpg``; optional
                          ``VGGFace2/bb_landmark/loose_bb_{train,test}.csv`` and ``VGGFace2/identity_meta.csv``
                          (also looked for under ``VGGFace2/meta/``)
LFW                       ``lfw/<Name>/<Name>_0001.jpg`` and ``lfw/pairs.txt`` (or ``pairs.txt`` beside ``lfw/``)
MPII                      ``mpii/images/*.jpg`` and the HRNet JSON conversion ``mpii/annot/{train,valid}.json``
                          (+ ``mpii/annot/gt_valid.mat``), or the same files as mmpose names them:
                          ``mpii/annotations/mpii_{train,val}.json`` (+ ``mpii_gt_val.mat``)
IJB-B / IJB-C             InsightFace's ``IJB_release`` layout: ``IJBC/loose_crop/*.jpg``,
                          ``IJBC/meta/ijbc_face_tid_mid.txt``, ``ijbc_template_pair_label.txt`` (+ optional
                          ``ijbc_name_5pts_score.txt``); ``IJBB/`` with the ``ijbb_`` prefix
MovieLens-100K            ``ml-100k/u.data``, ``ml-100k/u1.base`` ... ``u5.test``, ``ua.*``, ``ub.*``, ``u.info``
========================  =====================================================================================

Images are decoded with Pillow, cropped (see ``crop`` below), resized to ``size`` x ``size`` with bilinear
filtering (antialiased when shrinking) and returned as float32 in [0, 1]. Loaders hold everything in memory, so
each one first selects the rows it needs from the (cheap) annotation files and refuses to decode more than
``max_images`` images; by default ``max_images`` is what fits in
:data:`~privkit.data.paper.common.DEFAULT_IMAGE_BUDGET_BYTES` (512 MiB) at the requested size (about 10,000 images
at 64 px, 3,300 at 112 px). Ask for a subset (``selection``, ``n_samples``, ``folds``) or raise ``max_images``
explicitly.

Face crops (``crop``):

- ``"center"``: the largest centred square of the image (aligned CelebA: the 178 x 178 centre of the
  178 x 218 image; LFW's 250 x 250 images are unchanged);
- ``"full"``: the whole image, squashed to a square if it is not one;
- ``"box"``: a square around the face box, enlarged by ``margin`` on each side, padded with black where it
  leaves the image.

Face boxes and masks: :class:`~privkit.data.types.FaceSet` boxes are in output pixels (xyxy), clipped to the
image; masks are the box (real datasets have no segmentation). Where a dataset has no box for an image the box
is the whole source image, and ``meta["box_source"]`` says which rule was used.
"""
