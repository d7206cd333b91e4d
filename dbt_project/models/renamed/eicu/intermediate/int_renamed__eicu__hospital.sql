-- Hospitals of EHR-ChatQA's eICU database (its hospital table, from hospital.csv): every staged hospital, text
-- lower-cased; teachingstatus written back as the source's 't'/'f'.
select
    file_row,
    hospitalid,
    {{ ehrsql_eicu_text('numbedscategory') }} as numbedscategory,
    case when teachingstatus then 't' when not teachingstatus then 'f' end as teachingstatus,
    {{ ehrsql_eicu_text('region') }} as region
from ({{ renamed_eicu_file_rows('stg_eicu__hospital') }}) as hospital
