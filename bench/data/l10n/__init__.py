"""An English->X corpus of real human translations: the gettext catalogs (.mo files) that Debian
(bookworm) packages ship, each pair made by a free-software translation team (KDE, GNOME,
LibreOffice, the Translation Project, Xfce, MATE, ...).

    python -m bench.data.l10n --lang de --out bench/out/l10n-de --cache-dir bench/out/debs

1. discover (debian.py): the packages that ship a catalog of the language, from apt's Contents
   indices (`apt-get install apt-file lz4 && apt-file update` once), and the download list:
   package_rank.tsv's order within --budget-mb of .debs (or --packages FILE);
2. download: `apt-get download` into --cache-dir; cached .debs are reused, so a build for fr
   after de fetches little more than the language packs;
3. read (catalogs.py): the language's .mo members streamed out of `dpkg-deb --fsys-tarfile`,
   parsed by Python's gettext (or a plain .mo reader where gettext refuses one);
4. clean (clean.py): credits, untranslated, identical, too short or long, control characters and
   placeholder mismatches dropped; accelerator markers removed, whitespace normalised;
5. split (split.py): one translation per source (the most frequent), near-duplicate sources
   grouped, groups ranked by hash: test, then dev (one source per group), then train;
6. write (build.py): {train,dev,test}.{en,LANG}, {split}.meta (package, catalog, occurrences of
   each line), stats.json, packages.tsv, build.log.

The corpus is the same for the same packages: a different package set (another budget, or a
newer Debian) ranks the groups differently, so freeze a test set and pass its sources back with
--reserve to keep them out of a rebuild's splits.
"""
